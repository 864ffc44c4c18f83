"""What-if: the twin fitted to the server vtop watches, run at today's knobs and at changed ones.

Three steps, one module each, all functions of plain values and a `Store` (no I/O, no UI):
`workload` estimates who sends what from the metrics, `fit` fits the twin's step time to the
server's own steps with a hardware preset as the prior, and `predict` runs the twin on both,
checks it against what was observed and only then predicts a change. It stands on the sim and
the store, below triage: findings, the report and the TUI ask it, it asks none of them.
"""

"""What-if: the twin fitted to the server vtop watches, run at today's knobs and at changed ones.

The one home of predictions, all functions of plain values (no I/O but reading a trace, no UI):

    watched.py    what the twin is fitted to (`Watched`: a store, its knobs, its GPU), from a
                  trace or frames; the monitor hands over its own (`Monitor.watched`)
    workload.py   who sends what, estimated from the metrics
    fit.py        the twin's step time, fitted to the server's own steps (a preset the prior)
    check.py      the figures compared (read as every view reads them, `vtop.figures`) and the
                  self-check: does the twin at today's knobs reproduce today
    predict.py    the twin built and run on the observed workload, at today's knobs and after
                  a change, each figure with its band
    goals.py      what "best" means: the goals a choice and a trial are judged by
    search.py     the twin's choice of a finding's setting among candidates, under the goals
    sweep.py      the configurations a user names (`vtop whatif --set/--sweep`), and the row
                  the same goals choose
    advice.py     what a finding's advice will buy, read for the report, the screens and the
                  quiz alike (`prediction_reading`)

It stands on the simulator, the store and the figures, above triage (whose findings it is
asked about) and below the monitor: the monitor, the report, the TUI and the command line ask
it; it asks none of them, and never sees the monitor, only what was `Watched`.
"""

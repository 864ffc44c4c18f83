"""`vtop tune`: apply the twin's choice to a server vtop may restart, measure it, keep the best.

`flags` edits a vLLM command line or a flags file; `server` restarts a server (a command the
user gives, or a vLLM vtop launched itself); `loop` is the closed loop: watch, choose, ask,
restart, measure, compare with the prediction, keep or roll back. The command line
(`vtop.cli.tune`) builds the parts and prints; nothing here imports Textual or argparse.
"""

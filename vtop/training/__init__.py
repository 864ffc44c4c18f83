"""Training on recorded incidents: the questions a replay pauses on, their grading, the score.

A floor of its own, between the report (whose pass over a trace finds the questions) and the
screens and the command line that ask them: `questions.py` (where to pause, what to ask),
`grading.py` (how an answer scores, what the reveal says, the score). The replay screen
(`vtop.ui`) and the text quiz (`vtop.cli.train`) share it, so both ask and grade alike.
"""

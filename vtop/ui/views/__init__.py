"""What the screens show, as plain values: no Textual here.

Each module turns the monitor's figures, findings and traces into the lines, cells and choices
a screen draws (a panel's rows, a fleet row, a finding's detail, the verdict line, how the rows
of a terminal are shared out, the replay's player), so every one of them is tested without a
terminal and costs nothing to import headless. The widgets and screens one floor up
(`vtop.ui.widgets`, `vtop.ui.screens`, the apps) draw them. A test holds both rules: nothing
here imports Textual, nor anything of `vtop.ui` outside this package.
"""

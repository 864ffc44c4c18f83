"""The terminal UI: the only package that imports Textual.

`vtop.ui.app.VtopApp` takes any `FrameSource` and a `Monitor`; the modules without widgets
(`panels`, `trend`, `chart`, `verdict`, `headline`, `fleet`, `detail`, `thresholds`)
turn the monitor's state into plain values and are tested without a terminal. The app reaches
a terminal through `driver` and a browser through `web` (`vtop --web`, textual-serve).
"""

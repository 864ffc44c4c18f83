"""What "best" means to the user: the goal flags every mode that advises takes.

The twin's search (`vtop.whatif.search`) picks, for each finding, the configuration with the
most generated tokens/s that meets the goals: by default the seeds' sweet spot (no sustained
preemption, the mean ITL no more than 1.5x today's). `--max-ttft-s` and `--max-itl-ms` bound TTFT
p90 and the mean ITL; `--allow-preemption` lifts the preemption bound. The dashboard, the report,
training and `vtop whatif` take them with the same words, from here; a config file's `[goals]`
table (`vtop.cli.config`) gives their defaults.
"""

from __future__ import annotations

import argparse

from vtop.cli import ranges
from vtop.whatif.goals import Goals


def add_goals(group: argparse._ArgumentGroup, *, what: str = "the advice") -> None:
    """`--max-ttft-s S`, `--max-itl-ms MS`, `--allow-preemption`; `what` says what they steer."""
    group.add_argument(
        "--max-ttft-s",
        metavar="S",
        type=ranges.MAX_TTFT_S,
        help=ranges.ranged(f"{what}: keep the predicted TTFT p90 at most S", ranges.MAX_TTFT_S),
    )
    group.add_argument(
        "--max-itl-ms",
        metavar="MS",
        type=ranges.MAX_ITL_MS,
        help=ranges.ranged(
            f"{what}: keep the predicted mean ITL at most MS (default: 1.5x today's)",
            ranges.MAX_ITL_MS,
        ),
    )
    group.add_argument(
        "--allow-preemption",
        action="store_true",
        default=None,
        help=f"{what}: the most tokens/s even with some preemption (default: none sustained)",
    )


def goals_from(args: argparse.Namespace) -> Goals:
    """The goals the flags (or the config file's defaults for them) state."""
    itl_ms = getattr(args, "max_itl_ms", None)
    return Goals(
        max_ttft_s=getattr(args, "max_ttft_s", None),
        max_itl_s=itl_ms / 1000 if itl_ms is not None else None,
        allow_preemption=bool(getattr(args, "allow_preemption", False)),
    )

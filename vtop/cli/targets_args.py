"""`--targets FILE` and `--discover`: the flags that name endpoints, and the list they make.

The targets file, its labels and local discovery are `vtop.sources.targets`, which knows nothing
of argparse; this module is the command line's side: the flags beside `--url` in the "what to
watch" group, and `endpoints`, which takes their values (`vtop.cli.sources.SourceSpec` holds
them), prints what discovery found, and merges everything into one list of `Target`s (the first
mention of an endpoint wins). Keeping it here lets the sources stay below the command line in
the import graph.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TextIO

from vtop.sources.host import local_vllm_servers
from vtop.sources.targets import Target, TargetsError, describe, load_targets, merge
from vtop.sources.targets import discover as discover_targets
from vtop.sources.urls import check_url


def add_arguments(group: argparse._ArgumentGroup) -> None:
    """`--targets FILE` and `--discover`, beside `--url` in the "what to watch" group."""
    group.add_argument(
        "--targets",
        action="append",
        default=[],
        metavar="FILE",
        help="file of endpoints: one URL per line, optional name=value labels (knob labels "
        "such as max_num_seqs=128 set that server's knob), # comments (repeatable)",
    )
    group.add_argument(
        "--discover",
        action="store_true",
        help="find the vLLM servers running on this host, print them, and watch them",
    )


def endpoints(
    urls: Sequence[str],
    files: Sequence[str],
    *,
    discover: bool = False,
    fallback: Sequence[Target] = (),
    out: TextIO = sys.stderr,
) -> list[Target]:
    """Every endpoint the command line names: `--url`s, then `--targets` files, then
    `--discover`; when it names none, `fallback` (the config file's `[[endpoint]]`s,
    `vtop.cli.config`).

    Raises `TargetsError` (one line) for a bad file or a discovery that found nothing to add
    to an otherwise empty list. Discovered servers are printed to `out`, one line each.
    """
    groups: list[list[Target]] = []
    for url in urls:
        problem = check_url(url)
        if problem is not None:
            raise TargetsError(f"--url: {problem}")
        groups.append([Target(url)])
    for path in files:
        groups.append(load_targets(path))
    if discover:
        servers = local_vllm_servers()
        for proc in servers:
            print(f"vtop: found {describe(proc)}", file=out)
        if not servers:
            print("vtop: --discover found no vLLM server on this host", file=out)
        groups.append(discover_targets(servers))
    if not groups:  # the command line names no server: the config file's endpoints, if any
        groups.append(list(fallback))
    return merge(*groups)

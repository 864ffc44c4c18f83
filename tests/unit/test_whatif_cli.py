"""`vtop whatif --replay`: the table and the JSON on a recording of the real vLLM CPU server
(its budget-bound regime: 4 seats, 16 clients), and one line for what it cannot do.
`vtop whatif --url`: a short watch of the simulator's real /metrics page on a loopback socket,
Ctrl-C in a real process, a port nothing listens on, and the flags that pick one or the other."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from vtop import __version__
from vtop.cli.dispatch import main as vtop_main
from vtop.cli.exits import EXIT_OK, EXIT_UNKNOWN, EXIT_USAGE
from vtop.sim.server import serve
from vtop.sim.twin import Twin
from vtop.whatif.sweep import configurations

TRACE = Path(__file__).resolve().parents[1] / "fixtures" / "real-regimes" / "budget4.vtrace"


def test_the_table_has_observed_twin_and_one_row_per_sweep_value(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = vtop_main(["whatif", "--replay", str(TRACE), "--sweep", "max_num_seqs=4,16"])
    out = capsys.readouterr().out
    assert code == EXIT_OK
    rows = {line.split("  ")[0].strip(): line for line in out.splitlines() if "  " in line}
    assert {"observed", "twin today", "max_num_seqs=4", "max_num_seqs=16"} <= set(rows)
    assert "confidence high" in out
    assert "read: max_num_seqs=4" in out
    assert "assumed: think time 0" in out


def test_the_json_gives_each_figure_now_after_and_its_band(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = vtop_main(
        ["whatif", "--replay", str(TRACE), "--set", "max_num_seqs=16", "--format", "json"]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == EXIT_OK
    assert doc["prediction_check"]["confidence"] == "high"
    assert doc["prediction_check"]["errors"]["generation_tokens_per_s"] < 0.1
    (prediction,) = doc["predictions"]
    assert prediction["changes"] == {"max_num_seqs": 16}
    gen = prediction["predicted"]["generation_tokens_per_s"]
    assert gen["low"] <= gen["after"] <= gen["high"]
    assert gen["after"] > 1.5 * gen["now"]  # four seats to sixteen for sixteen clients
    waiting = prediction["predicted"]["waiting"]
    assert waiting["after"] < waiting["now"]


REPORT_SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "docs" / "report-schema.json").read_text()
)


def about(doc: dict[str, Any]) -> dict[str, Any]:
    """The document's head, held to the report schema's own definitions of the three fields:
    the same shape as a report's JSON, so one consumer reads both."""
    head = {k: doc[k] for k in ("vtop", "source", "window")}
    for name, value in head.items():
        jsonschema.validate(value, REPORT_SCHEMA["properties"][name])
    return head


def test_the_json_says_which_vtop_which_source_and_which_window_as_a_report_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = vtop_main(
        [
            "whatif",
            "--replay",
            str(TRACE),
            "--window",
            "30s",
            "--set",
            "max_num_seqs=16",
            "--format",
            "json",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == EXIT_OK
    head = about(doc)
    assert list(doc)[:3] == ["vtop", "source", "window"]  # first, as in a report
    assert head["vtop"] == __version__
    assert head["source"] == {"kind": "replay", "name": "budget4.vtrace"}
    window = head["window"]
    assert 25 <= window["duration_s"] <= 30 and 20 <= window["polls"] <= 31  # its last 30 s
    assert window["end_t"] - window["start_t"] == window["duration_s"]
    assert window["from"] < window["to"] and window["from"].endswith("Z")
    assert window["evaluations"] == 0 and window["step_s"] is None  # no rules ran


def test_knob_values_are_typed_and_bad_ones_named() -> None:
    assert configurations(["max_num_seqs=32", "enable_prefix_caching=off"], None) == [
        {"max_num_seqs": 32, "enable_prefix_caching": False}
    ]
    assert configurations([], "max_num_seqs=8,16") == [{"max_num_seqs": 8}, {"max_num_seqs": 16}]
    with pytest.raises(ValueError, match="max_num_seqs=many: expected a whole number from 1 to"):
        configurations(["max_num_seqs=many"], None)
    with pytest.raises(ValueError, match="unknown knob 'seqs'"):
        configurations(["seqs=3"], None)


def test_a_bad_set_and_a_missing_trace_are_one_line_each(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert vtop_main(["whatif", "--replay", str(TRACE), "--set", "seqs=3"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("vtop: unknown knob 'seqs'") and err.count("\n") == 1
    missing = tmp_path / "none.vtrace"
    assert vtop_main(["whatif", "--replay", str(missing)]) == EXIT_UNKNOWN
    err = capsys.readouterr().err
    assert err.startswith("vtop: ") and err.count("\n") == 1


QUEUED = Path(__file__).resolve().parents[2] / "traces" / "ttft-queueing.vtrace"
SIM = Path(__file__).resolve().parents[2] / "traces" / "budget-too-small.vtrace"


def test_a_withheld_family_prints_a_dash_and_why(capsys: pytest.CaptureFixture[str]) -> None:
    # a queue the twin does not form (its waiting 0 against 14.2): occupancy and latency off
    code = vtop_main(["whatif", "--replay", str(QUEUED), "--set", "max_num_seqs=8"])
    out = capsys.readouterr().out
    assert code == EXIT_OK
    (row,) = [line for line in out.splitlines() if line.startswith("max_num_seqs=8")]
    cells = row.split()
    assert cells[1] != "–" and cells[2:6] == ["–"] * 4  # gen tok/s kept; occupancy not
    assert cells[6:] == ["–"] * 5  # latency too: its queue p50 47 ms against 2 s
    assert "occupancy withheld (running, waiting, KV usage, preemptions/s: –)" in out
    assert "latency withheld (queue p50, TTFT p50, TTFT p90, ITL p50, ITL mean: –)" in out
    code = vtop_main(
        ["whatif", "--replay", str(QUEUED), "--set", "max_num_seqs=8", "--format", "json"]
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["prediction_check"]["families"]["occupancy"]["withheld"] is True
    (prediction,) = doc["predictions"]
    assert "waiting" not in prediction["predicted"]
    assert "waiting" in prediction["withheld"]["waiting"]
    assert "generation_tokens_per_s" in prediction["predicted"]
    assert "queue_p50" not in prediction["predicted"]


def test_the_best_row_is_the_fastest_within_the_latency_bound(
    capsys: pytest.CaptureFixture[str],
) -> None:
    sweep = ["whatif", "--replay", str(SIM), "--sweep", "max_num_seqs=16,32,64"]
    # 32's mean ITL ~22 ms, 64's ~33 (observed 16.5 ms, times the twin's change)
    assert vtop_main([*sweep, "--max-itl-ms", "25"]) == EXIT_OK
    out = capsys.readouterr().out
    marked = [line.split()[0] for line in out.splitlines() if line.endswith("◀ best")]
    assert marked == ["max_num_seqs=32"]
    goals = "most gen tok/s with no sustained preemption, ITL mean <= 25ms"
    assert f"best: max_num_seqs=32 ({goals})" in out
    assert vtop_main([*sweep, "--max-itl-ms", "25", "--format", "json"]) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    assert doc["best"] == {"max_num_seqs": 32} and doc["best_note"] is None
    assert doc["goals"]["max_itl_s"] == 0.025 and doc["goals"]["line"] == goals
    misses = {p["changes"]["max_num_seqs"]: p["misses"] for p in doc["predictions"]}
    assert misses[32] == [] and misses[64] and misses[64][0].startswith("ITL mean ")
    assert vtop_main([*sweep, "--max-itl-ms", "5", "--max-ttft-s", "1", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["best"] is None and doc["best_note"].startswith("no row meets the goals")
    assert vtop_main([*sweep, "--max-itl-ms", "5"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "best: none, no row meets the goals (" in out and "◀ best" not in out


def test_the_best_row_meets_the_same_goals_as_a_findings_search(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """By default the seeds' sweet spot: no sustained preemption (64 seats still preempt on
    the memory-ceiling server), unless --allow-preemption lifts it."""
    sweep = ["whatif", "--replay", "memory-ceiling", "--sweep", "max_num_seqs=32,64,128"]
    assert vtop_main(sweep) == EXIT_OK
    out = capsys.readouterr().out
    marked = [line.split()[0] for line in out.splitlines() if line.endswith("◀ best")]
    assert marked == ["max_num_seqs=32"]
    assert (
        "best: max_num_seqs=32 (most gen tok/s with no sustained preemption, ITL mean <= 1.5x"
        in out
    )
    assert vtop_main([*sweep, "--allow-preemption", "--format", "json"]) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    assert doc["best"] == {"max_num_seqs": 64} and doc["goals"]["allow_preemption"] is True


def test_a_twin_too_far_off_chooses_no_row_and_says_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # its twin's waiting is 0 against 14.2 observed: confidence low
    assert vtop_main(["whatif", "--replay", str(QUEUED), "--sweep", "max_num_seqs=4,8"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "best: none, the twin does not choose: the self-check's confidence is low" in out
    assert "◀ best" not in out


@pytest.mark.parametrize(
    "bad",
    [
        ["--sweep", "max_num_seqs=8,16", "--max-itl-ms", "fast"],
        ["--sweep", "max_num_seqs=8,16", "--max-ttft-s", "-1"],
        ["--sweep", "max_num_seqs=8,16", "--max-ttft-s", "nan"],
    ],
)
def test_a_bad_bound_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], bad: list[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:  # the parser's range
        vtop_main(["whatif", "--replay", str(SIM), *bad])
    assert stopped.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("vtop whatif: error: argument --max-") and err.count("\n") == 1


def test_a_bound_without_a_sweep_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for goal in (["--max-itl-ms", "20"], ["--allow-preemption"]):
        bad = ["--set", "max_num_seqs=8", *goal]
        assert vtop_main(["whatif", "--replay", str(SIM), *bad]) == EXIT_USAGE
        err = capsys.readouterr().err
        assert err.startswith("vtop: --max-itl-ms, --max-ttft-s and --allow-preemption choose")
        assert err.count("\n") == 1


LIVE = ["--duration", "4s", "--interval", "0.5", "--set", "max_num_seqs=64", "--format", "json"]
"""A short watch of a simulated server: eight polls (more while warming up) at 0.5 s."""


@pytest.fixture
def server() -> Iterator[str]:
    """`vtop sim`'s budget-too-small server (16 seats, a queue behind them) on a real socket,
    warmed up so the first polls already see its steady state."""
    twin = Twin("budget-too-small")
    twin.warm_up()
    with serve(twin) as srv:
        yield srv.url


def test_a_live_watch_predicts_from_the_servers_own_page(
    capsys: pytest.CaptureFixture[str], server: str
) -> None:
    code = vtop_main(["whatif", "--url", server, *LIVE])
    captured = capsys.readouterr()
    assert code == EXIT_OK
    assert captured.err == f"vtop: watching {server} for 4 s to fit the twin…\n"
    doc = json.loads(captured.out)
    assert about(doc)["source"] == {"kind": "live", "name": server}
    assert doc["window"]["polls"] >= 8
    assert doc["observed"]["generation_tokens_per_s"] > 0
    assert doc["observed"]["running"] > 10  # the 16 seats held full
    assert doc["twin_today"]["generation_tokens_per_s"] > 0
    # the knobs the monitor discovered reached the twin: the page's cache_config_info
    assert any("vllm:cache_config_info" in line for line in doc["read"])
    (prediction,) = doc["predictions"]
    assert prediction["changes"] == {"max_num_seqs": 64}
    if doc["prediction_check"]["confidence"] == "withheld":
        assert doc["prediction_check"]["reason"]
    else:
        gen = prediction["predicted"]["generation_tokens_per_s"]
        assert gen["low"] <= gen["after"] <= gen["high"]


def test_ctrl_c_ends_the_watch_and_still_predicts(server: str, tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "vtop",
        "whatif",
        "--url",
        server,
        "--duration",
        "60s",
        "--interval",
        "0.5",
        "--set",
        "max_num_seqs=64",
        "--format",
        "json",
    ]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # the first poll was answered
        assert line.startswith(f"vtop: watching {server} for 1m 00s")
        time.sleep(1.5)
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == EXIT_OK, err
    assert time.monotonic() - started < 20  # not the minute asked for
    doc = json.loads(out)
    assert doc["observed"]["generation_tokens_per_s"] > 0
    assert doc["predictions"][0]["changes"] == {"max_num_seqs": 64}


def test_a_server_that_is_not_there_is_one_line_naming_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens on it
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    assert vtop_main(["whatif", "--url", url, *LIVE]) == EXIT_UNKNOWN
    assert time.monotonic() - started < 3  # said at the first poll, not after the duration
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("vtop: ") and captured.err.count("\n") == 1
    assert url in captured.err and "refused" in captured.err


@pytest.mark.parametrize(
    "words",
    [["--url", "http://127.0.0.1:9", "--replay", str(TRACE)], ["--set", "max_num_seqs=8"]],
    ids=["both", "neither"],
)
def test_exactly_one_of_url_and_replay(
    capsys: pytest.CaptureFixture[str], words: list[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        vtop_main(["whatif", *words])
    assert exit_.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "--url" in err and "--replay" in err and err.count("\n") == 1


def test_the_watch_flags_go_with_url_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert vtop_main(["whatif", "--replay", str(TRACE), "--duration", "4s"]) == EXIT_USAGE
    assert capsys.readouterr().err.startswith("vtop: --duration and --interval go with --url")
    with pytest.raises(SystemExit) as stopped:
        vtop_main(["whatif", "--url", "http://127.0.0.1:9", "--interval", "0"])
    assert stopped.value.code == EXIT_USAGE
    assert capsys.readouterr().err == (
        "vtop whatif: error: argument --interval: 0 is not a "
        "number from 0.01 to 3600 s (see vtop whatif --help)\n"
    )


def test_the_monitors_connection_and_knob_flags_reach_the_watch(
    capsys: pytest.CaptureFixture[str], server: str
) -> None:
    code = vtop_main(
        ["whatif", "--url", server, *LIVE, "--max-num-seqs", "20", "--header", "X-Team: infra"]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == EXIT_OK
    (cap,) = [line for line in doc["read"] + doc["assumed"] if line.startswith("max_num_seqs=")]
    assert cap.startswith("max_num_seqs=20 (") and "--max-num-seqs" in cap, cap
    assert (
        vtop_main(["whatif", "--url", server, "--header", "nocolon", "--set", "max_num_seqs=8"])
        == EXIT_USAGE
    )
    assert "--header" in capsys.readouterr().err
    assert vtop_main(["whatif", "--replay", str(TRACE), "--max-num-seqs", "20"]) == EXIT_USAGE
    assert capsys.readouterr().err == (
        "vtop: --header, --trust-redirect, --ca-cert, --insecure, --max-num-seqs and "
        "--max-num-batched-tokens go with --url\n"
    )

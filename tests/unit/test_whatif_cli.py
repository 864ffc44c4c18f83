"""`vtop whatif --replay`: the table and the JSON on a recording of the real vLLM CPU server
(its budget-bound regime: 4 seats, 16 clients), and one line for what it cannot do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vtop.cli.dispatch import main as vtop_main
from vtop.cli.exits import EXIT_OK, EXIT_UNKNOWN, EXIT_USAGE
from vtop.cli.whatif import configurations

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
    code = vtop_main(["whatif", "--replay", str(TRACE), "--set", "max_num_seqs=16",
                      "--format", "json"])  # fmt: skip
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


def test_knob_values_are_typed_and_bad_ones_named() -> None:
    assert configurations(["max_num_seqs=32", "enable_prefix_caching=off"], None) == [
        {"max_num_seqs": 32, "enable_prefix_caching": False}
    ]
    assert configurations([], "max_num_seqs=8,16") == [{"max_num_seqs": 8}, {"max_num_seqs": 16}]
    with pytest.raises(ValueError, match="max_num_seqs=many: expected int"):
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


REAL = Path(__file__).resolve().parents[2] / "traces" / "vllm-cpu-kv-exhaustion.vtrace"
SIM = Path(__file__).resolve().parents[2] / "traces" / "budget-too-small.vtrace"


def test_withheld_latency_prints_a_dash_and_why(capsys: pytest.CaptureFixture[str]) -> None:
    code = vtop_main(["whatif", "--replay", str(REAL), "--set", "max_num_seqs=8"])
    out = capsys.readouterr().out
    assert code == EXIT_OK
    (row,) = [line for line in out.splitlines() if line.startswith("max_num_seqs=8")]
    cells = row.split()
    assert cells[1] != "–" and cells[-4:] == ["–"] * 4  # gen tok/s kept; queue, TTFT, ITL not
    assert "latency withheld (queue p50, TTFT p50, TTFT p90, ITL p50: –)" in out
    code = vtop_main(["whatif", "--replay", str(REAL), "--set", "max_num_seqs=8",
                      "--format", "json"])  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert doc["prediction_check"]["families"]["latency"]["withheld"] is True
    (prediction,) = doc["predictions"]
    assert "queue_p50" not in prediction["predicted"]
    assert "queue p50" in prediction["withheld"]["queue_p50"]
    assert "generation_tokens_per_s" in prediction["predicted"]


def test_the_best_row_is_the_fastest_within_the_latency_bound(
    capsys: pytest.CaptureFixture[str],
) -> None:
    sweep = ["whatif", "--replay", str(SIM), "--sweep", "max_num_seqs=16,32,64"]
    assert vtop_main([*sweep, "--max-itl-ms", "19"]) == EXIT_OK  # 64's ITL p50 is ~19.5 ms
    out = capsys.readouterr().out
    marked = [line.split()[0] for line in out.splitlines() if line.endswith("◀ best")]
    assert marked == ["max_num_seqs=32"]
    assert "best under ITL p50 <= 19ms: max_num_seqs=32" in out
    assert vtop_main([*sweep, "--max-itl-ms", "19", "--format", "json"]) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    assert doc["best"] == {"max_num_seqs": 32} and doc["bounds"]["max_itl_s"] == 0.019
    assert vtop_main([*sweep, "--max-itl-ms", "5", "--max-ttft-s", "1", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["best"] is None
    assert vtop_main([*sweep, "--max-itl-ms", "5"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "best under ITL p50 <= 5ms: none" in out and "◀ best" not in out


@pytest.mark.parametrize(
    "bad",
    [["--sweep", "max_num_seqs=8,16", "--max-itl-ms", "fast"],
     ["--sweep", "max_num_seqs=8,16", "--max-ttft-s", "-1"],
     ["--sweep", "max_num_seqs=8,16", "--max-ttft-s", "nan"],
     ["--set", "max_num_seqs=8", "--max-itl-ms", "20"]],
)  # fmt: skip
def test_a_bad_bound_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], bad: list[str]
) -> None:
    assert vtop_main(["whatif", "--replay", str(SIM), *bad]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("vtop: --max-") and err.count("\n") == 1

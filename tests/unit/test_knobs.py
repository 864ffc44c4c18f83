"""The knob catalog is the one home of every knob (issue 27): its readers agree with it, the
twin's arguments and the rules' knobs are all in it, and no module keeps a table of its own.

Before it, four name/type tables (command line, targets labels, rule expressions, what-if),
four value parsers that took different words, vLLM's defaults in four places and the KV wall
three times drifted apart one edit at a time. These tests are what keeps them from drifting
back: a new `ServeArgs` field, a rule recommending a knob nobody specified, or a module that
starts its own `{"max_num_seqs": int, ...}` fails here.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
import yaml

from vtop import knobs
from vtop.model import Recommendation
from vtop.sim.hardware import CPU_ENGINE, QWEN_4090_BF16, QWEN_H100_BF16
from vtop.sim.serve_args import ServeArgs
from vtop.sources import cmdline, discovery, targets
from vtop.triage import derived
from vtop.whatif import predict

ROOT = Path(__file__).resolve().parents[2]
GIB = 1024**3

NOT_KNOBS = {"port"}
"""ServeArgs fields that configure the simulated server, not a knob a what-if changes."""


def test_every_twin_argument_is_a_twin_knob_and_back() -> None:
    fields = {f.name for f in dataclasses.fields(ServeArgs)} - NOT_KNOBS
    assert fields == set(knobs.twin_knobs())
    for f in dataclasses.fields(ServeArgs):
        if f.name in fields:
            spec = knobs.KNOBS[f.name]
            assert spec.kind.__name__ in str(f.type), (f.name, f.type, spec.kind)
    assert {n: knobs.KNOBS[n].kind for n in fields} == predict.KNOB_FIELDS


def _rule_knobs() -> set[str]:
    """Every knob a shipped rule recommends or reads in an `unless`/guard."""
    names: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            knob = node.get("knob")
            if isinstance(knob, str):
                names.add(knob)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in sorted((ROOT / "rules").glob("*.yaml")):
        walk(yaml.safe_load(path.read_text(encoding="utf-8")))
    return names


def test_every_knob_a_rule_names_is_in_the_catalog_with_a_flag_and_a_range() -> None:
    named = _rule_knobs()
    assert "max_num_seqs" in named and len(named) >= 6  # the walk found the rules' knobs
    for name in named:
        spec = knobs.KNOBS[name]
        assert spec.rules_read and spec.range is not None, name
        assert spec.flag == "--" + name.replace("_", "-")


def test_the_readers_are_views_of_the_catalog() -> None:
    assert set(cmdline._KNOBS) == {n for n, s in knobs.KNOBS.items() if "cmdline" in s.where}
    assert cmdline._SHORT == {
        "tp": "tensor_parallel_size",
        "pp": "pipeline_parallel_size",
        "dp": "data_parallel_size",
        "q": "quantization",
        "asc": "api_server_count",
    }
    assert set(targets.KNOB_LABELS) == {n for n, s in knobs.KNOBS.items() if "label" in s.where}
    assert {n: s.meaning for n, s in knobs.KNOBS.items() if s.rules_read} == derived.KNOBS
    for spec in knobs.read_at("label").values():
        assert spec.range is not None, spec.name  # a label a user writes is checked


def test_user_words_parse_the_same_everywhere() -> None:
    for word in ("true", "on", "1", "yes", "enable", "TRUE", " Enable "):
        assert knobs.parse("enable_prefix_caching", word) is True
    for word in ("false", "off", "0", "no", "disable"):
        assert knobs.parse("enable_chunked_prefill", word) is False
    assert knobs.parse("max_num_seqs", "32k") == 32000
    assert knobs.parse("max_num_batched_tokens", "8K") == 8192
    assert knobs.parse("gpu_memory_utilization", "0.95") == 0.95
    assert knobs.parse("quantization", "awq") == "awq"  # no range: its type only
    assert knobs.parse("something_new", "12") == 12  # unknown: a number if it reads as one
    for name, text, said in [
        ("max_num_seqs", "0", "max_num_seqs=0: expected a whole number from 1 to 1048576"),
        ("max_num_seqs", "12.5", "max_num_seqs=12.5: expected a whole number"),
        ("enable_prefix_caching", "maybe", "enable_prefix_caching=maybe: expected true or false"),
        ("kv_cache_dtype", "evil", "kv_cache_dtype=evil: expected one of auto,"),
        ("gpu_memory_utilization", "nan", "gpu_memory_utilization=nan: expected a number above"),
        ("port", "http", "port=http: expected a int"),
    ]:
        with pytest.raises(ValueError) as caught:
            knobs.parse(name, text)
        assert str(caught.value).startswith(said), str(caught.value)


def test_server_words_are_read_as_the_server_runs_with_them() -> None:
    assert knobs.read("enable_prefix_caching", "True") is True  # a label's Python str()
    assert knobs.read("enable_prefix_caching", "False") is False
    assert knobs.read("num_gpu_blocks", "None") is None
    assert knobs.read("max_num_seqs", "0") == 0  # unchecked: what the server says it runs
    assert knobs.read("max_num_seqs", 64) == 64 and knobs.read("max_num_seqs", 6.5) is None
    assert knobs.read("max_num_seqs", True) is None  # a YAML boolean is no count
    assert knobs.read("gpu_memory_utilization", 1) == 1
    assert knobs.read("served_model_name", ["a", "b"]) == "a"
    assert "\x1b" not in str(knobs.read("model", "m\x1b[2Jx"))  # argv is anyone's to write


def test_one_flag_spelling_for_recommendations_the_twin_and_training() -> None:
    assert knobs.flag("max_num_seqs", 128) == "--max-num-seqs 128"
    assert knobs.flag("enable_prefix_caching", False) == "--no-enable-prefix-caching"
    assert knobs.flag("enable_chunked_prefill", True) == "--enable-chunked-prefill"
    assert knobs.flag("gpu_memory_utilization", 0.95) == "--gpu-memory-utilization 0.95"
    rec = Recommendation("enable_prefix_caching", None, False, "disable", "", {})
    assert rec.flag == "--no-enable-prefix-caching"
    from vtop.sim.serve_args import resolve

    argv = resolve(ServeArgs(enable_prefix_caching=False, max_num_seqs=7), QWEN_4090_BF16)
    line = " ".join(argv.command_line())
    assert "--max-num-seqs 7" in line and line.endswith("--no-enable-prefix-caching --port 8000")


def test_defaults_by_version_and_gpu_class_are_said_once() -> None:
    assert knobs.scheduler_defaults((0, 33), 24 * GIB).max_num_seqs == 256
    assert knobs.scheduler_defaults((0, 33), 80 * GIB).max_num_batched_tokens == 8192
    assert knobs.scheduler_defaults((0, 33), 192 * GIB).max_num_batched_tokens == 16384
    assert knobs.scheduler_defaults((0, 7), 80 * GIB, 4096).max_num_batched_tokens == 4096
    # the twin's presets and discovery read the same table
    assert QWEN_H100_BF16.default_max_num_seqs == 1024
    assert QWEN_4090_BF16.default_max_num_batched_tokens == 2048
    assert CPU_ENGINE.scheduler_defaults == knobs.FALLBACK
    found = discovery.defaults("0.33.0", 80 * GIB, None)
    assert found["max_num_seqs"].value == 1024 and found["gpu_memory_utilization"].value == 0.92
    assert discovery.defaults("0.10.0", None, None)["gpu_memory_utilization"].value == 0.9
    assert ServeArgs().gpu_memory_utilization == knobs.GPU_MEMORY_UTILIZATION
    assert ServeArgs().block_size == knobs.KNOBS["block_size"].default


def _constant_tables(path: Path) -> list[int]:
    """Lines of dict literals keyed by three or more knob names with constant values (a type,
    a string, a number): a knob table of its own."""
    names = set(knobs.KNOBS)
    lines: list[int] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Dict):
            continue
        keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
        if sum(1 for k in keys if k in names) < 3:
            continue
        if all(isinstance(v, ast.Constant | ast.Name) for v in node.values):
            lines.append(node.lineno)
    return lines


def test_no_module_keeps_a_knob_table_of_its_own(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text('T = {"max_num_seqs": int, "block_size": int, "port": int}\n')
    assert _constant_tables(planted) == [1]  # the scan can fail
    found = {
        str(p.relative_to(ROOT)): lines
        for p in sorted((ROOT / "vtop").rglob("*.py"))
        if p.name != "knobs.py" and (lines := _constant_tables(p))
    }
    assert found == {}


def test_the_kv_wall_is_one_constant() -> None:
    hits = []
    for path in sorted((ROOT / "vtop").rglob("*.py")):
        if path.name == "knobs.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare | ast.BinOp):
                parts = [node.left, *getattr(node, "comparators", [getattr(node, "right", None)])]
                if any(isinstance(p, ast.Constant) and p.value == 0.9 for p in parts) and any(
                    "kv" in ast.unparse(p).lower() or "cap" in ast.unparse(p).lower() for p in parts
                ):
                    hits.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert hits == [], "the KV wall is knobs.KV_WALL"

"""The expression sandbox: what rules may compute, and what they may not reach."""

from __future__ import annotations

import pytest

from vtop.triage.expr import ExprError, Value, compile_expr

KNOWN = {"max_num_seqs", "kv_fit", "x", "kv_cache_dtype"}


def ok(text: str, **names: Value) -> Value:
    return compile_expr(text, KNOWN.__contains__).eval(names)


def test_arithmetic_and_whitelisted_functions() -> None:
    assert ok("0.95 * max_num_seqs", max_num_seqs=64) == pytest.approx(60.8)
    assert ok("min(ceil_to(x, 8), floor_to(kv_fit, 8))", x=83, kv_fit=115.2) == 88
    assert ok("clamp(x, 1, 10)", x=40) == 10
    assert ok("pow2_ceil(x)", x=5120) == 8192
    assert ok("pow2_floor(x)", x=5120) == 4096
    assert ok("pow2_round(x)", x=5000) == 4096
    assert ok("kv_cache_dtype == 'auto'", kv_cache_dtype="auto") is True
    assert ok("1 if x > 2 else 0", x=3) == 1


def test_unknown_inputs_give_unknown_not_zero() -> None:
    assert ok("2 * max_num_seqs", max_num_seqs=None) is None
    assert ok("min(x, kv_fit)", x=10, kv_fit=None) == 10
    assert ok("known(kv_fit, 2 * x)", x=64, kv_fit=None) == 128
    assert ok("x / 0", x=1) is None
    assert ok("x", x=float("inf")) is None


@pytest.mark.parametrize(
    "text",
    [
        "x.__class__",
        "().__class__.__bases__[0]",
        "__import__('os')",
        "open('/etc/passwd')",
        "[i for i in range(10)]",
        "lambda: 1",
        "x[0]",
        "f'{x}'",
        "eval('1')",
        "y + 1",
        "min(x, key=abs)",
        "x ** 99999",
        "x = 1",
        "(",
    ],
)
def test_rejected_at_load(text: str) -> None:
    with pytest.raises(ExprError):
        compile_expr(text, KNOWN.__contains__)


def test_names_read_are_recorded() -> None:
    e = compile_expr("min(ceil_to(x, 8), kv_fit)", KNOWN.__contains__)
    assert e.names == {"x", "kv_fit"}

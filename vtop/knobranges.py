"""The values a user may type for a server knob: one range or set of choices per knob.

Knobs are typed in several places (`--max-num-seqs` on the monitor, `vtop whatif --set` and
`--sweep`, knob labels in a targets file, a training answer), and each used to check only the
type: `max_num_seqs=0`, `-5`, `nan`, `1e23` or `kv_cache_dtype=evil` went through to the twin
or the rules, which then crashed or predicted nonsense. This table is the one place that says
what each knob may be; every place a user types a knob reads it (`parse`, `check`), and a bad
value is one line naming the knob and its range or choices (`max_num_seqs=0: expected a whole
number from 1 to 1048576`). The ranges are vLLM's own limits where it has them (a fraction of
GPU memory in (0, 1], its KV cache dtypes) and generous sizes elsewhere: wide enough for any
real server, narrow enough that arithmetic on them stays finite.

What a server reports of itself (its command line, its page) is not checked here: it is what
the server runs with, right or wrong.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vtop.model import KnobValue

TRUE = ("true", "on", "1", "yes")
FALSE = ("false", "off", "0", "no")


@dataclass(frozen=True, slots=True)
class KnobRange:
    """What one knob may be: a whole number or a number within [lo, hi] (`lo_open`: above lo,
    not at it), true/false, or one of `choices`."""

    kind: type
    lo: float = 0.0
    hi: float = 0.0
    lo_open: bool = False
    choices: tuple[str, ...] = ()

    def describe(self) -> str:
        """`a whole number from 1 to 1048576`, `a number above 0 up to 1`, `true or false`,
        `one of auto, fp8`: the range as an error and a --help say it."""
        if self.kind is bool:
            return "true or false"
        if self.kind is str:
            return "one of " + ", ".join(self.choices)
        what = "a whole number" if self.kind is int else "a number"
        lo = f"above {number(self.lo)}" if self.lo_open else f"from {number(self.lo)}"
        return f"{what} {lo} {'up to' if self.lo_open else 'to'} {number(self.hi)}"

    def shown(self) -> str:
        """The range in a --help: `1–1048576`, `(0, 1]`."""
        if self.kind in (bool, str):
            return self.describe()
        lo, hi = number(self.lo), number(self.hi)
        return f"above {lo}, up to {hi}" if self.lo_open else f"{lo}–{hi}"

    def admits(self, value: KnobValue) -> bool:
        if self.kind is bool:
            return isinstance(value, bool)
        if self.kind is str:
            return isinstance(value, str) and value in self.choices
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.kind is int and not isinstance(value, int):
            return False
        if not math.isfinite(value):
            return False
        above = value > self.lo if self.lo_open else value >= self.lo
        return above and value <= self.hi


def number(x: float) -> str:
    """A bound as people read it: `1048576`, `0.01`, never `1.04858e+06`."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


KNOB_RANGES: dict[str, KnobRange] = {
    "max_num_seqs": KnobRange(int, 1, 1 << 20),
    "max_num_batched_tokens": KnobRange(int, 1, 1 << 24),
    "max_model_len": KnobRange(int, 1, 1 << 24),
    "kv_capacity_tokens": KnobRange(int, 1, 1 << 36),
    "gpu_memory_utilization": KnobRange(float, 0, 1, lo_open=True),
    "block_size": KnobRange(int, 1, 1024),
    "long_prefill_token_threshold": KnobRange(int, 0, 1 << 24),
    "tensor_parallel_size": KnobRange(int, 1, 1024),
    "pipeline_parallel_size": KnobRange(int, 1, 1024),
    "data_parallel_size": KnobRange(int, 1, 1024),
    "api_server_count": KnobRange(int, 1, 1024),
    "enable_prefix_caching": KnobRange(bool),
    "enable_chunked_prefill": KnobRange(bool),
    "kv_cache_dtype": KnobRange(
        str, choices=("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc")
    ),
}
"""Every knob a user may type, and what it may be (vLLM's own choices for kv_cache_dtype)."""


def check(name: str, value: KnobValue) -> KnobValue:
    """`value` if knob `name` may be it (a knob with no range here passes); ValueError, one
    line naming the knob and its range, if not."""
    spec = KNOB_RANGES.get(name)
    if spec is None or spec.admits(value):
        return value
    shown = str(value).lower() if isinstance(value, bool) else str(value)
    raise ValueError(f"{name}={_short(shown)}: expected {spec.describe()}")


def _short(text: str) -> str:
    return text if len(text) <= 40 else text[:39] + "…"


def parse(name: str, text: str) -> KnobValue:
    """What a user typed for knob `name`, as its type, within its range; ValueError, one line,
    if it is not. A knob with no range here is a number if it reads as one, else text."""
    spec = KNOB_RANGES.get(name)
    t = text.strip()
    if spec is None:
        for kind in (int, float):
            try:
                return kind(t)
            except ValueError:
                pass
        return t
    value: KnobValue
    if spec.kind is bool:
        low = t.lower()
        value = True if low in TRUE else False if low in FALSE else t
    elif spec.kind is str:
        value = t
    else:
        try:
            value = int(t) if spec.kind is int else float(t)
        except ValueError:
            value = None
    if not spec.admits(value):  # said as typed: `=1e23`, not the float it reads as
        raise ValueError(f"{name}={_short(t)}: expected {spec.describe()}")
    return value

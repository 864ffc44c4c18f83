"""The server's knobs, one spec each: what every part of vtop knows about a knob lives here.

Knobs are what vtop reads from a server (its command line, the labels of its page, a targets
file), what its rules name and recommend, what the twin can set, and what a user types
(`--set max_num_seqs=64`, a sweep, a training answer). Each of those used to keep its own
table of names and types, its own value parser (one took `1` for true but not `enable`, the
next the reverse), its own copy of vLLM's defaults and of the KV wall, and its own way of
spelling a flag. Now one `KnobSpec` per knob says it once, and the readers ask it:

- `parse` reads what a user typed, within the knob's `KnobRange` (one line when it does not
  fit: `max_num_seqs=0: expected a whole number from 1 to 1048576`);
- `read` reads what a server says of itself (`32k`, Python's `True`, `None`), unchecked: it is
  what the server runs with, right or wrong;
- `flag` spells the `vllm serve` flag (`--max-num-seqs 128`, `--no-enable-prefix-caching`);
- `scheduler_defaults` and `KnobSpec.default` are vLLM's defaults, by version and GPU class;
- `KV_WALL` is the KV usage from which the pool, not the batch cap, bounds the batch.

The ranges are vLLM's own limits where it has them (a fraction of GPU memory in (0, 1], its KV
cache dtypes) and generous sizes elsewhere: wide enough for any real server, narrow enough that
arithmetic on them stays finite.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, TypeGuard

from vtop import untrusted

KnobValue = int | float | str | bool | None

Where = Literal["cmdline", "page", "label", "host"]
"""Where a source reads a knob: `cmdline` the vLLM process's argv (and its `--config` YAML),
`page` a `vllm:cache_config_info` label, `label` a targets-file label (`max_num_seqs=64`),
`host` the hardware of a server vtop runs beside (`vtop.sources.cpu`)."""

KV_WALL: Final = 0.9
"""KV usage from which the KV pool bounds the batch (vLLM's dashboard orange, llm-d's "may get
preempted"): a queue above it may be the pool's doing, not the batch cap's."""

TRUE: Final = ("true", "on", "1", "yes", "enable")
FALSE: Final = ("false", "off", "0", "no", "disable")

GIB: Final = 1024**3

BLOCK_SIZE: Final = 16
GPU_MEMORY_UTILIZATION: Final = 0.92
KV_CACHE_DTYPE: Final = "auto"
PREFIX_CACHING: Final = True
"""vLLM's defaults that do not depend on the GPU (0.33, on a GPU), typed for those who build a
configuration from them (the twin's `ServeArgs`); the specs below carry the same values."""


@dataclass(frozen=True, slots=True)
class KnobRange:
    """What a user may type for a knob: a whole number or a number within [lo, hi] (`lo_open`:
    above lo, not at it), true/false, or one of `choices`."""

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
        if not is_number(value):
            return False
        if self.kind is int and not isinstance(value, int):
            return False
        if not math.isfinite(value):
            return False
        above = value > self.lo if self.lo_open else value >= self.lo
        return above and value <= self.hi


@dataclass(frozen=True, slots=True)
class KnobSpec:
    """One knob: its type, what it means, where vtop reads it, and what a user may set it to."""

    name: str
    """vLLM's engine-argument (`dest`) name: `max_num_seqs`."""
    kind: type
    """int, float, bool or str."""
    meaning: str
    """One line, as the rule reference and `rules list` print it."""
    where: tuple[Where, ...] = ()
    range: KnobRange | None = None
    """What a user may type for it; None: nobody types it (the server reports it)."""
    twin: bool = False
    """The twin can set it (a `vtop.sim.serve_args.ServeArgs` field): a what-if may change it."""
    default: KnobValue = None
    """vLLM's default where it does not depend on the version or GPU (see `scheduler_defaults`
    for those that do)."""
    page_label: str | None = None
    """Its label on `vllm:cache_config_info`, where `where` has `page`."""
    short: str | None = None
    """vLLM's short alias (`tp` for `-tp`)."""
    many: bool = False
    """Takes several values on a command line (`--served-model-name a b`); vtop keeps the first."""
    rules_read: bool = True
    """A rule's expression may read it (False for what only names the server: model, port)."""

    @property
    def flag(self) -> str:
        """The `vllm serve` flag: `--max-num-seqs`."""
        return flag_name(self.name)


_WHOLE = 1 << 20


def _counted(name: str, meaning: str, short: str) -> KnobSpec:
    """A count of processes or GPUs (1 by default), set on the command line or a label."""
    return KnobSpec(
        name, int, meaning, ("cmdline", "label"), KnobRange(int, 1, 1024), default=1, short=short
    )


KNOBS: Final[dict[str, KnobSpec]] = {
    s.name: s
    for s in (
        KnobSpec(
            "max_num_seqs",
            int,
            "batch width cap (scheduler budget)",
            ("cmdline", "label"),
            range=KnobRange(int, 1, _WHOLE),
            twin=True,
        ),
        KnobSpec(
            "max_num_batched_tokens",
            int,
            "tokens per engine step (prefill + decode)",
            ("cmdline", "label"),
            range=KnobRange(int, 1, 1 << 24),
            twin=True,
        ),
        KnobSpec(
            "max_model_len",
            int,
            "longest context a request may have",
            ("cmdline", "label"),
            range=KnobRange(int, 1, 1 << 24),
            twin=True,
        ),
        KnobSpec(
            "kv_capacity_tokens",
            int,
            "KV pool size in tokens (kv_cache_size_tokens or blocks × block size)",
            ("page", "label"),
            range=KnobRange(int, 1, 1 << 36),
            page_label="kv_cache_size_tokens",
        ),
        KnobSpec("num_gpu_blocks", int, "KV blocks", ("page",), page_label="num_gpu_blocks"),
        KnobSpec(
            "num_gpu_blocks_override",
            int,
            "KV blocks pinned by the flag (unset: sized from memory; an FP8 cache keeps the count)",
            ("cmdline", "page"),
            range=KnobRange(int, 1, 1 << 30),
            twin=True,
            page_label="num_gpu_blocks_override",
        ),
        KnobSpec(
            "block_size",
            int,
            "tokens per KV block",
            ("cmdline", "page"),
            range=KnobRange(int, 1, 1024),
            twin=True,
            default=BLOCK_SIZE,
            page_label="block_size",
        ),
        KnobSpec(
            "gpu_memory_utilization",
            float,
            "share of GPU memory vLLM may use",
            ("cmdline", "page", "label"),
            range=KnobRange(float, 0, 1, lo_open=True),
            twin=True,
            default=GPU_MEMORY_UTILIZATION,
            page_label="gpu_memory_utilization",
        ),
        KnobSpec(
            "kv_cache_dtype",
            str,
            "KV cache data type (auto, fp8, ...)",
            ("cmdline", "page"),
            range=KnobRange(
                str, choices=("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc")
            ),
            twin=True,
            default=KV_CACHE_DTYPE,
            page_label="cache_dtype",
        ),
        KnobSpec(
            "enable_prefix_caching",
            bool,
            "prefix caching on or off",
            ("cmdline", "page"),
            range=KnobRange(bool),
            twin=True,
            default=PREFIX_CACHING,
            page_label="enable_prefix_caching",
        ),
        KnobSpec(
            "enable_chunked_prefill",
            bool,
            "chunked prefill on or off",
            ("cmdline",),
            range=KnobRange(bool),
            default=True,
        ),
        KnobSpec(
            "long_prefill_token_threshold",
            int,
            "prompt chunk above which a prefill counts as long",
            ("cmdline", "label"),
            range=KnobRange(int, 0, 1 << 24),
            twin=True,
            default=0,
        ),
        KnobSpec(
            "max_num_partial_prefills",
            int,
            "prefills chunked at once (rejected by the V1 engine: no rule reads it)",
            ("cmdline",),
            rules_read=False,
        ),
        KnobSpec(
            "kv_cache_max_concurrency",
            float,
            "vLLM's own estimate of max_model_len requests KV holds",
            ("page",),
            page_label="kv_cache_max_concurrency",
        ),
        _counted("tensor_parallel_size", "GPUs one model copy is split across", "tp"),
        _counted("pipeline_parallel_size", "pipeline stages", "pp"),
        _counted("data_parallel_size", "model copies (engines)", "dp"),
        _counted("api_server_count", "API server processes in front of the engine", "asc"),
        KnobSpec("fp8_kv_supported", bool, "the server can keep an FP8 KV cache", ("host",)),
        KnobSpec("quantization", str, "weight quantisation method", ("cmdline",), short="q"),
        KnobSpec("model", str, "the model served", ("cmdline",), rules_read=False),
        KnobSpec(
            "served_model_name",
            str,
            "the names the model is served under",
            ("cmdline",),
            many=True,
            rules_read=False,
        ),
        KnobSpec("host", str, "the address the server listens on", ("cmdline",), rules_read=False),
        KnobSpec("port", int, "the port the server listens on", ("cmdline",), rules_read=False),
    )
}
"""Every knob vtop knows, by vLLM's engine-argument name."""


def read_at(where: Where) -> dict[str, KnobSpec]:
    """The knobs a source reads at `where`, by name."""
    return {name: s for name, s in KNOBS.items() if where in s.where}


def twin_knobs() -> tuple[str, ...]:
    """The knobs a what-if can set (the twin's `ServeArgs` fields)."""
    return tuple(name for name, s in KNOBS.items() if s.twin)


def number(x: float) -> str:
    """A bound as people read it: `1048576`, `0.01`, never `1.04858e+06`."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


def is_number(value: KnobValue | None) -> TypeGuard[int | float]:
    """Whether a knob's value is a number (a switch's True is not one)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def format_value(value: KnobValue) -> str:
    """A knob value the way vLLM's command line takes it: `64`, `0.95`, `True`."""
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value) and abs(value) >= 1:
            return str(int(value))
        return f"{value:g}"
    return str(value)


def flag_name(name: str) -> str:
    """`--max-num-seqs` for `max_num_seqs`: vLLM's spelling of an engine argument's flag."""
    return "--" + name.replace("_", "-")


def flag_argv(name: str, value: KnobValue) -> list[str]:
    """The `vllm serve` arguments setting knob `name` to `value`: `["--max-num-seqs", "128"]`;
    `--enable-prefix-caching` / `--no-enable-prefix-caching` for a boolean."""
    spelled = flag_name(name)
    if isinstance(value, bool):
        return [spelled if value else "--no-" + spelled[2:]]
    return [spelled, format_value(value)]


def flag(name: str, value: KnobValue) -> str:
    """`flag_argv` as one would type it: `--max-num-seqs 128`."""
    return " ".join(flag_argv(name, value))


def flags(changes: Mapping[str, KnobValue], sep: str = "  ") -> str:
    """Several changes as one types them: `--kv-cache-dtype fp8  --max-num-seqs 96`."""
    return sep.join(flag(name, value) for name, value in changes.items())


def check(name: str, value: KnobValue) -> KnobValue:
    """`value` if knob `name` may be it (a knob no user types passes); ValueError, one line
    naming the knob and its range, if not."""
    spec = KNOBS.get(name)
    if spec is None or spec.range is None or spec.range.admits(value):
        return value
    shown = str(value).lower() if isinstance(value, bool) else str(value)
    raise ValueError(f"{name}={_short(shown)}: expected {spec.range.describe()}")


def ranged(name: str) -> KnobRange | None:
    """What a user may type for knob `name`; None when nobody types it."""
    spec = KNOBS.get(name)
    return spec.range if spec is not None else None


def parse(name: str, text: str) -> KnobValue:
    """What a user typed for knob `name`, as its type, within its range; ValueError, one line,
    if it is not. A knob vtop does not know is a number if it reads as one, else text."""
    spec = KNOBS.get(name)
    t = text.strip()
    if spec is None or spec.range is None:
        value = _as(spec.kind, t) if spec is not None else _untyped(t)
        if value is None:
            kind = spec.kind.__name__ if spec is not None else "value"
            raise ValueError(f"{name}={_short(t)}: expected a {kind}")
        return value
    value = _as(spec.kind, t)
    if not spec.range.admits(value):  # said as typed: `=1e23`, not the float it reads as
        raise ValueError(f"{name}={_short(t)}: expected {spec.range.describe()}")
    return value


def read(name: str, raw: object) -> KnobValue:
    """What a server says knob `name` is (an argv token, a YAML value, a label's Python `str()`),
    as the knob's type; None when it does not fit or says `None`. Unchecked against the range:
    it is what the server runs with. Text is made inert (anyone on the host writes argv)."""
    if isinstance(raw, list):
        names = [untrusted.clean(x, 200) for x in raw if str(x)]
        return names[0] if names else None
    if raw is None or raw in ("None", ""):
        return None
    spec = KNOBS.get(name)
    if spec is None:
        return _untyped(untrusted.clean(raw, 200))
    if isinstance(raw, bool):
        return raw if spec.kind is bool else None
    if isinstance(raw, int | float) and spec.kind in (int, float):
        return raw if spec.kind is float or isinstance(raw, int) else None
    return _as(spec.kind, untrusted.clean(raw, 200))


def _as(kind: type, text: str) -> KnobValue:
    """`text` as `kind`, or None: booleans by their words, ints as vLLM reads them (`32k`)."""
    t = text.strip()
    if kind is bool:
        low = t.lower()
        return True if low in TRUE else False if low in FALSE else None
    if kind is int:
        return human_int(t)
    if kind is float:
        try:
            return float(t)
        except ValueError:
            return None
    return t or None


def _untyped(text: str) -> KnobValue:
    """A value of a knob vtop does not know: Python's True/False, a number, else text."""
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT]?)\Z")
_HUMAN_SCALE: Final = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}


def human_int(text: str) -> int | None:
    """vLLM's human-readable ints: `2048`, `-1`, `32k` (×1000), `32K` (×1024), `1.5m`."""
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    match = _HUMAN_INT.match(text)
    if match is None:
        return None
    digits, suffix = match.groups()
    if not suffix:
        return None  # "12.5": not an integer
    scale = _HUMAN_SCALE[suffix.lower()]
    if suffix.isupper():
        scale = 1024 ** (list(_HUMAN_SCALE).index(suffix.lower()) + 1)
    return int(float(digits) * scale)


def _short(text: str) -> str:
    return text if len(text) <= 40 else text[:39] + "…"


@dataclass(frozen=True, slots=True)
class SchedulerDefaults:
    """vLLM's defaults for the two scheduler knobs no metric exposes, and why they apply."""

    max_num_seqs: int
    max_num_batched_tokens: int
    tier: str
    """`GPUs under 70 GiB`: the class of hardware they are the defaults of."""


FALLBACK: Final = SchedulerDefaults(128, 2048, "no GPU (vLLM's fallback constants)")
"""What vLLM uses where no usage context or GPU sets the defaults (its CPU build included)."""


def scheduler_defaults(
    version: tuple[int, ...] | None,
    gpu_mem_bytes: int | None,
    max_model_len: int | None = None,
) -> SchedulerDefaults:
    """The OpenAI server's defaults for max_num_seqs and max_num_batched_tokens (0.33, on a
    GPU): by GPU memory from V1, max(max_model_len, 2048) tokens before (V0 without chunked
    prefill). An unknown GPU is assumed to be under 70 GiB, the commonest rental."""
    if version is not None and version < (0, 8):
        tokens = max(max_model_len or 0, 2048)
        return SchedulerDefaults(
            256, tokens, "V0 without chunked prefill: max(max_model_len, 2048)"
        )
    if gpu_mem_bytes is None:
        return SchedulerDefaults(256, 2048, "GPU unknown; assuming one under 70 GiB")
    if gpu_mem_bytes < 70 * GIB:
        return SchedulerDefaults(256, 2048, "GPUs under 70 GiB")
    if gpu_mem_bytes < 160 * GIB:
        return SchedulerDefaults(1024, 8192, "GPUs of 70 to 160 GiB")
    return SchedulerDefaults(1024, 16384, "GPUs of 160 GiB or more")


def gpu_memory_utilization_default(version: tuple[int, ...] | None) -> float:
    """0.92 from vLLM 0.20 (the spec's default), 0.9 before and where the version is unknown:
    the lower of the two, so a KV pool sized from it is never overstated."""
    if version is not None and version >= (0, 20):
        return float(KNOBS["gpu_memory_utilization"].default)  # type: ignore[arg-type]
    return 0.9

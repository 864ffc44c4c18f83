"""Immutable values that flow through vtop: what one poll saw, and what the rules concluded.

Sources (a live scrape, the simulator, a trace being replayed) build these; the store, the
rules, the report and the UI only read them. Keeping them frozen and free of I/O is what lets
live, replay and report share one path: a `Frame` recorded today replays tomorrow into the same
code that drew it the first time.

Missing data is `None`, never 0: a gauge the server did not expose is unknown, not idle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Literal, NamedTuple

from vtop import knobs
from vtop.knobs import KnobValue, format_value

Provenance = Literal["metrics", "process", "flag", "inferred", "default"]
"""Where a configuration value came from, best first (see `vtop.sources.discovery`)."""


class SeriesKey(NamedTuple):
    """One canonical series of one endpoint.

    `signal` is a catalog name (`running`, `ttft`, ...). `model` and `engine` come from vLLM's
    `model_name` and `engine` labels ("" when the page has none). `label` is the signal's one
    distinguishing label value, if it has one (`reason="capacity"`, `finished_reason="stop"`).
    The aggregate over all models and engines uses `ALL` for both.
    """

    signal: str
    model: str = ""
    engine: str = ""
    label: str = ""


ALL = "*"
"""`model` / `engine` value of the series that aggregates every model and engine."""


@dataclass(frozen=True, slots=True)
class Histogram:
    """A cumulative Prometheus histogram at one instant.

    `bounds` are the finite upper bounds in increasing order; `buckets[i]` counts observations
    `<= bounds[i]`; `count` is the `+Inf` bucket (all observations).
    """

    bounds: tuple[float, ...]
    buckets: tuple[float, ...]
    count: float
    sum: float


@dataclass(frozen=True, slots=True)
class Knob:
    """A configuration value and where it came from.

    `detail` says precisely where (`vllm:cache_config_info`, `pid 4242 command line`,
    `vLLM 0.32 default for GPUs under 70 GiB`), so a recommendation can show its inputs.
    """

    name: str
    value: KnobValue
    provenance: Provenance
    detail: str = ""

    @property
    def assumed(self) -> bool:
        """True when the value was not read from the server or its command line."""
        return self.provenance in ("inferred", "default")


@dataclass(frozen=True, slots=True)
class EndpointInfo:
    """What the server says about itself, read once on connect and again after a restart."""

    version: str | None = None
    models: tuple[str, ...] = ()
    max_model_len: int | None = None


@dataclass(frozen=True, slots=True)
class Scrape:
    """One poll of one endpoint's /metrics.

    `error` is a one-line message when the poll failed; the other fields then hold whatever was
    known (latency of the failed attempt, no series). `latency_s` and `size_bytes` are the
    scrape's own cost: a starved API server answers late, and its gauges then lie.
    """

    endpoint: str
    t: float
    latency_s: float | None = None
    size_bytes: int | None = None
    error: str | None = None
    scalars: Mapping[SeriesKey, float] = field(default_factory=dict)
    histograms: Mapping[SeriesKey, Histogram] = field(default_factory=dict)
    info: Mapping[str, str] = field(default_factory=dict)
    has_vllm_series: bool = True
    knobs: Mapping[str, Knob] | None = None
    """The configuration, set on the scrape where it was (re)discovered, else None."""
    server: EndpointInfo | None = None
    """What the server said of itself, set on the scrape where it was (re)read, else None."""

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One GPU at one instant. `None` is a field the card (or the reader) does not give.

    `source` is who read it: "nvml" (this host's driver) or "page" (dcgm-exporter series on
    the server's /metrics, see `vtop.signals.gpus`).
    """

    index: int
    name: str
    uuid: str | None = None
    util_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temp_c: float | None = None
    sm_clock_mhz: float | None = None
    process_mem_bytes: int | None = None
    error: str | None = None
    source: str = "nvml"


@dataclass(frozen=True, slots=True)
class GpuStatus:
    """All GPUs of this host, or why none can be read (`unavailable`)."""

    gpus: tuple[GpuReading, ...] = ()
    unavailable: str | None = None


@dataclass(frozen=True, slots=True)
class HostReading:
    """The host vtop runs on, and vtop's own cost on it."""

    cpu_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    self_cpu_pct: float | None = None
    self_rss_bytes: int | None = None


EventKind = Literal["restart", "disconnect", "reconnect", "config", "note"]


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened at an instant and belongs on the charts and in traces."""

    t: float
    kind: EventKind
    endpoint: str
    message: str


@dataclass(frozen=True, slots=True)
class Frame:
    """Everything one poll produced: a scrape per endpoint, the GPUs, the host, and events."""

    t: float
    scrapes: tuple[Scrape, ...]
    gpu: GpuStatus = GpuStatus(unavailable="not read")
    host: HostReading | None = None
    events: tuple[Event, ...] = ()


class Severity(IntEnum):
    """A finding's level, ordered."""

    OK = 0
    INFO = 1
    WARNING = 2
    CRITICAL = 3


@dataclass(frozen=True, slots=True)
class Recommendation:
    """A concrete knob change: `--max-num-seqs 128`, never "raise max_num_seqs"."""

    knob: str
    current: Knob | None
    new_value: KnobValue
    direction: Literal["raise", "lower", "set", "enable", "disable"]
    formula: str
    inputs: Mapping[str, Knob | float | None]
    tradeoff: str = ""
    confidence: Literal["high", "medium", "low"] = "high"
    explanation: str = ""
    """`formula` evaluated in words and numbers ("demand p95 = 97 → rounded up to a multiple
    of 8: 104; …"), for people; "" when the value is a constant (`'fp8'`)."""
    formula_value: KnobValue | None = None
    """What the formula gave, where the twin chose `new_value` instead (None: the formula's)."""

    @property
    def change(self) -> str:
        """`down from 256` / `up from 64` for a number that moves; "" otherwise."""
        cur = self.current.value if self.current is not None else None
        new = self.new_value
        if isinstance(cur, bool) or isinstance(new, bool):
            return ""
        if not isinstance(cur, int | float) or not isinstance(new, int | float) or cur == new:
            return ""
        return f"{'down' if new < cur else 'up'} from {format_value(cur)}"

    @property
    def flag(self) -> str:
        """The `vllm serve` flag: `--max-num-seqs 128` (booleans: `--enable-prefix-caching`)."""
        return knobs.flag(self.knob, self.new_value)

    @property
    def engine_arg(self) -> str:
        """The engine argument: `max_num_seqs=128`."""
        return f"{self.knob}={format_value(self.new_value)!s}"


FindingState = Literal["pending", "firing", "suppressed", "insufficient"]
"""`pending`: the condition holds and the rule will fire in `needs_s` more seconds if it goes on
holding; `insufficient`: it holds, but the rule waits for something other than time (requests
to finish)."""

ACCRUING: tuple[FindingState, ...] = ("pending", "insufficient")
"""States of a finding whose condition holds while its evidence is still accruing: not a
verdict yet, and not an all-clear either."""


EvidencePath = Literal["decisive", "borderline", ""]
"""The path a pending finding counts down on (`Finding.path`)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """What one rule concluded about one endpoint at one evaluation.

    `pending` findings hold their condition, for `held_s` so far of the `for_s` their rule
    needs on its quicker path (decisive evidence, or the full window), `needs_s` more;
    `suppressed` ones fire but are explained away by a root cause (`suppressed_by`), and say
    so instead of giving advice.
    """

    rule: str
    title: str
    endpoint: str
    severity: Severity
    state: FindingState
    summary: str
    evidence: tuple[tuple[str, str], ...] = ()
    recommendations: tuple[Recommendation, ...] = ()
    since: float | None = None
    held_s: float = 0.0
    for_s: float = 0.0
    suppressed_by: str | None = None
    needs_s: float | None = None
    """Seconds of evidence a pending finding still needs (None: not a matter of time)."""
    path: EvidencePath = ""
    """Which of the rule's paths `needs_s` counts down on: its fast one (evidence far past the
    thresholds) or its slow one; a change of path is why a pending "N of M s" changes M."""
    missing: tuple[str, ...] = ()
    """What an `insufficient` finding's evidence still lacks, one phrase each (`7 of 20
    finished requests`, a suspect rule's `waits_for`); empty for every other state. The
    summary says the same in words (`not enough data yet: 7 of 20 finished requests`); this is
    the fact itself, for whatever shows it differently, so nobody parses the words back."""

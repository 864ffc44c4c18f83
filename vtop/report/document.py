"""The report document's shape, as types: what `Collector.document()` builds and every format reads.

The document is plain JSON data, and docs/report-schema.json is its contract with consumers;
these TypedDicts are the same contract for the code, so a builder that forgets a required field,
or a renderer that reads one under the wrong name or type, fails `mypy --strict` instead of a
user's script. They follow the schema field for field: a property the schema requires is a
required key, one it leaves optional is `NotRequired`, an enum is a `Literal`, a map (knobs,
latency) is a `dict`; tests/unit/test_report_document.py walks the schema against them, so the
two cannot drift. The knob and recommendation entries are `vtop.summary`'s (`--once` writes the
same ones, and that layer sits below this one); they are named here with the rest.

Functional TypedDicts where a key is a Python keyword (`from`, `to`). No `from __future__
import annotations` here: Python 3.11 decides `NotRequired` from the evaluated annotations,
and strings would make every key required at run time.
"""

from typing import Literal, NotRequired, TypedDict, final

from vtop.exits import Verdict
from vtop.knobs import KnobValue
from vtop.model import EventKind, FindingState, Severity
from vtop.summary import AlternativeDoc, BandDoc, KnobDoc, RecommendationDoc
from vtop.whatif.check import Confidence

__all__ = [
    "AlternativeDoc",
    "BandDoc",
    "CheckFamilyDoc",
    "Document",
    "EndpointDoc",
    "EndpointStatus",
    "EventDoc",
    "EvidenceDoc",
    "FindingDoc",
    "GpuDoc",
    "GpuSource",
    "KnobDoc",
    "LatencyDoc",
    "NoSignals",
    "PredictionCheckDoc",
    "PredictionDoc",
    "RecommendationDoc",
    "SearchDoc",
    "ServerDoc",
    "SeverityName",
    "SignalDoc",
    "SignalName",
    "SignalsDoc",
    "SourceDoc",
    "SourceKind",
    "StatDoc",
    "Status",
    "TimelineDoc",
    "TimelineName",
    "VerdictCode",
    "WindowDoc",
    "severity_name",
    "signals_of",
]

Status = Verdict
"""`vtop.exits.Verdict`: the statuses are the exit codes' verdicts."""
VerdictCode = Literal[0, 1, 2, 3]
"""A verdict's exit code as the document writes it (`vtop.exits.verdict_code`, a plain int)."""
SeverityName = Literal["OK", "INFO", "WARNING", "CRITICAL"]
SourceKind = Literal["live", "replay", "demo"]
EndpointStatus = Literal["ok", "partial", "unreachable", "no_vllm"]
GpuSource = Literal["nvml", "page"]
SignalName = Literal[
    "running",
    "waiting",
    "kv_usage",
    "preemptions_per_s",
    "generation_tokens_per_s",
    "prompt_tokens_per_s",
    "requests_per_s",
]
"""A key of `SignalsDoc`."""
TimelineName = Literal[
    "running", "waiting", "kv_usage", "preemptions_per_s", "generation_tokens_per_s", "ttft_p90"
]
"""A series of `TimelineDoc` other than its times."""

_SEVERITIES: tuple[SeverityName, ...] = ("OK", "INFO", "WARNING", "CRITICAL")


def severity_name(level: Severity) -> SeverityName:
    """The schema's name of a severity (`Severity.WARNING.name`, as a type the schema knows)."""
    return _SEVERITIES[level]


class SourceDoc(TypedDict):
    kind: SourceKind
    name: str


WindowDoc = TypedDict(
    "WindowDoc",
    {
        "from": str | None,
        "to": str | None,
        "start_t": float | None,
        "end_t": float | None,
        "duration_s": float,
        "polls": int,
        "evaluations": int,
        "step_s": float | None,
    },
)


class StatDoc(TypedDict):
    """A GPU figure over the window."""

    avg: float | None
    max: float | None
    last: float | None


class SignalDoc(TypedDict):
    avg: float | None
    max: float | None
    last: float | None
    unit: str


@final
class SignalsDoc(TypedDict):
    running: SignalDoc
    waiting: SignalDoc
    kv_usage: SignalDoc
    preemptions_per_s: SignalDoc
    generation_tokens_per_s: SignalDoc
    prompt_tokens_per_s: NotRequired[SignalDoc]
    requests_per_s: NotRequired[SignalDoc]


@final
class NoSignals(TypedDict):
    """The top level's signals when the window had no endpoint: an empty object."""


def signals_of(signals: SignalsDoc | NoSignals) -> SignalsDoc | None:
    """The top level's signals, or None where the window had no endpoint."""
    return signals if "running" in signals else None


class LatencyDoc(TypedDict):
    observations: float | None
    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None


class EvidenceDoc(TypedDict):
    name: str
    value: str


class SearchDoc(TypedDict):
    """The twin's search around the rule's formula (`vtop.whatif.search.Choice`)."""

    goals: str
    """What "best" meant: `most gen tok/s with no sustained preemption, …`."""
    checked: bool
    """Whether the twin could judge the candidates; false: the formula's value stands."""
    moved: bool
    """Whether the twin chose another configuration than the formula's."""
    meets: bool
    """Whether the configuration recommended is predicted to meet the goals (false: none of
    those the twin ran does, and the formula's value stands)."""
    keeps_today: bool
    """Whether the twin chose the configuration the server runs (no change meets the goals
    better): the finding then recommends no knob the twin sets."""
    formula: dict[str, KnobValue]
    """The configuration the rule's formula gave."""
    note: str
    tried: int
    cut_short: bool
    """Whether the report's time budget stopped the search before its scan was done (a host
    short of CPU): the choice is then the best of fewer configurations."""
    line: str
    """How the configuration was chosen and the goals, in words, as the text formats say it."""


class PredictionDoc(TypedDict):
    """What the finding's recommendations will buy, run through the twin together."""

    changes: dict[str, KnobValue]
    confidence: Confidence
    reason: str | None
    """Why nothing is predicted (confidence "withheld")."""
    line: str
    """The prediction in words: `gen tok/s 150 → 305 tok/s (+103 %, ±15 %); …`."""
    promised: str | None
    """The figure the advice promises to move."""
    gain: float | None
    """The predicted improvement on it (0.5: 50 % better)."""
    demoted: bool
    verdict: str | None
    """Why the advice is demoted: the gain is small, and what limits the server instead."""
    withheld: dict[str, str]
    """Figure -> why it is not predicted."""
    search: NotRequired[SearchDoc]
    """How the twin chose the configuration predicted (absent: no search ran)."""


class CheckFamilyDoc(TypedDict):
    worst: str | None
    error: float | None
    measure: Literal["relative", "factor"]
    withheld: bool
    reason: str | None


class PredictionCheckDoc(TypedDict):
    """The twin at today's knobs against what the server showed: the predictions' footing."""

    endpoint: str
    window_s: float
    observed: dict[str, float | None]
    twin: dict[str, float | None]
    errors: dict[str, float | None]
    confidence: Confidence
    reason: str | None
    families: dict[str, CheckFamilyDoc]
    read: list[str]
    assumed: list[str]


class FindingDoc(TypedDict):
    rule: str
    title: NotRequired[str]
    endpoint: str
    severity: SeverityName
    state: FindingState
    counts: bool
    summary: str
    evidence: list[EvidenceDoc]
    recommendations: list[RecommendationDoc]
    suppressed_by: NotRequired[str | None]
    suppressed_since_t: NotRequired[float | None]
    suppressed_since: NotRequired[str | None]
    first_t: float
    last_t: float
    first: NotRequired[str]
    last: NotRequired[str]
    evaluations: NotRequired[int]
    active_at_end: bool
    held_s: NotRequired[float]
    """Pending or insufficient only."""
    needs_s: NotRequired[float | None]
    """Pending or insufficient only."""
    missing: NotRequired[list[str]]
    """Pending or insufficient only: what the evidence still lacks (`Finding.missing`)."""
    prediction: NotRequired[PredictionDoc | None]


class ServerDoc(TypedDict):
    version: str | None
    models: list[str]
    max_model_len: int | None


class EndpointDoc(TypedDict):
    url: str
    status: EndpointStatus
    error: str | None
    server: ServerDoc
    polls: int
    failed_polls: int
    restarts: int
    knobs: dict[str, KnobDoc]
    signals: SignalsDoc
    latency: dict[str, LatencyDoc]


class GpuDoc(TypedDict):
    index: int
    name: str
    mem_total_bytes: NotRequired[float | None]
    source: NotRequired[GpuSource | None]
    util_pct: NotRequired[StatDoc | None]
    mem_used_bytes: NotRequired[StatDoc | None]
    power_w: NotRequired[StatDoc | None]
    temp_c: NotRequired[StatDoc | None]
    error: NotRequired[str | None]
    error_since: NotRequired[str | None]


class EventDoc(TypedDict):
    t: float
    time: str
    kind: EventKind
    endpoint: str
    message: str


class TimelineDoc(TypedDict):
    t: list[float]
    running: NotRequired[list[float | None]]
    waiting: NotRequired[list[float | None]]
    kv_usage: NotRequired[list[float | None]]
    preemptions_per_s: NotRequired[list[float | None]]
    generation_tokens_per_s: NotRequired[list[float | None]]
    ttft_p90: NotRequired[list[float | None]]


class Document(TypedDict):
    """The whole report (`report_version` 1)."""

    report_version: Literal[1]
    vtop: str
    status: Status
    exit_code: VerdictCode
    reason: str
    source: SourceDoc
    window: WindowDoc
    endpoint: str | None
    knobs: dict[str, KnobDoc]
    signals: SignalsDoc | NoSignals
    latency: dict[str, LatencyDoc]
    findings: list[FindingDoc]
    endpoints: list[EndpointDoc]
    gpus: list[GpuDoc]
    gpu_unavailable: NotRequired[str | None]
    events: list[EventDoc]
    timeline: TimelineDoc
    prediction_check: NotRequired[PredictionCheckDoc | None]

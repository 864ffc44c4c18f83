"""Where to pause a recorded incident and what to ask there: the training quiz's questions.

`vtop --replay FILE --train` replays a trace with the findings hidden. Wherever a rule starts
firing, the replay pauses and the learner names the diagnosis (from the whole rule catalog,
not just the rules that fire in this trace, so the answer is not given away) and the knob to
change, with its new value or the way to move it. This module finds those pauses with the
report's own pass over the trace (`replay_collector`), so training asks exactly about what a
report would flag; `vtop.training.grading` grades the answers.

Every question offers the same knobs in the same order (`COMMON_KNOBS`, then any the finding
recommends that are not among them), so the list itself never hints at the answer. The store
is read where the rule first fires, during the pass (`questions` keeps that `Reading` on the
question, milliseconds), for the twin the reveal runs; the replay screen makes its own pass
(`questions_of`) and runs the twin on a worker instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from vtop.model import Finding
from vtop.monitor import Monitor
from vtop.report.collect import Collector, FindingsFn, monitor_findings
from vtop.trace.reader import Warn
from vtop.whatif.advice import Reading, prediction_reading

Direction = Literal["raise", "lower", "set", "enable", "disable"]
DIRECTIONS: tuple[Direction, ...] = ("raise", "lower", "set", "enable", "disable")
SETTINGS = {"kv_cache_dtype", "long_prefill_token_threshold"}
"""Knobs set to a value they did not have (fp8; a threshold where there was none)."""


def moves(knob: str) -> tuple[Direction, ...]:
    """The directions a knob can change in: switches turn on or off, settings are set."""
    if knob.startswith("enable_"):
        return ("enable", "disable")
    if knob in SETTINGS:
        return ("set",)
    return ("raise", "lower")


@dataclass(frozen=True, slots=True)
class Choice:
    """A diagnosis the learner can pick: a rule of the catalog."""

    rule: str
    title: str


@dataclass(frozen=True, slots=True)
class Question:
    """A pause in the replay: at `t`, `finding` (hidden until revealed) began firing."""

    number: int
    t: float
    endpoint: str
    finding: Finding
    choices: tuple[Choice, ...]
    knobs: tuple[str, ...]
    """Knobs offered for the change: every knob a rule may recommend, in a fixed order."""
    reading: Reading | None = field(default=None, compare=False, repr=False)
    """The store as the rule saw it when it fired, for the twin (None: no prediction here)."""
    fixes: tuple[tuple[str, str], ...] = ()
    """Every (knob, direction) the rule's own advice lists, whether or not this firing
    recommended it (`if:` conditions aside): each is a right answer."""

    @property
    def points(self) -> int:
        return 4

    def changes(self) -> list[tuple[str, Direction]]:
        """Every (knob, direction) a learner may pick, in a fixed order (`moves`)."""
        return [(k, d) for k in self.knobs for d in moves(k)]


CONFIG_KNOBS = (
    "max_num_seqs",
    "max_num_batched_tokens",
    "gpu_memory_utilization",
    "max_model_len",
    "kv_cache_dtype",
    "enable_prefix_caching",
)
"""The configuration a question shows of the server, whatever the incident."""

COMMON_KNOBS = (
    *CONFIG_KNOBS,
    "enable_chunked_prefill",
    "long_prefill_token_threshold",
    "tensor_parallel_size",
    "api_server_count",
    "num_gpu_blocks_override",
)
"""Every knob a shipped rule may recommend (a test holds them to it), and the usual suspects:
the same list on every question, so the list itself never hints at the answer."""


def questions(
    path: str,
    catalog: Sequence[Choice],
    *,
    findings: FindingsFn = monitor_findings,
    warn: Warn | None = None,
) -> list[Question]:
    """One question per rule (and endpoint) that begins firing in the trace, in time order."""
    from vtop.report.run import replay_collector

    readings: dict[tuple[str, str], Reading | str] = {}

    def watched(monitor: Monitor) -> Iterable[Finding]:
        # Where a rule first fires is where its question pauses: read the store there.
        found = list(findings(monitor))
        for f in found:
            if f.state == "firing" and (f.endpoint, f.rule) not in readings:
                reading = prediction_reading(monitor.watched(f.endpoint), f)
                readings[(f.endpoint, f.rule)] = reading
        return found

    collector = replay_collector(path, findings=watched, warn=warn)
    return questions_of(
        collector, catalog, {k: r for k, r in readings.items() if isinstance(r, Reading)}
    )


def questions_of(
    collector: Collector,
    catalog: Sequence[Choice],
    readings: Mapping[tuple[str, str], Reading] | None = None,
) -> list[Question]:
    """The questions of a finished pass over a trace (the replay screen makes its own pass);
    `readings`: the store where each (endpoint, rule) first fired, for its prediction."""
    out: list[Question] = []
    rules = collector.monitor.engine.by_id
    for t, f in collector.onsets():
        recommended = tuple(r.knob for r in f.recommendations)
        knobs = tuple(dict.fromkeys((*COMMON_KNOBS, *recommended)))
        known = {c.rule for c in catalog}
        choices = tuple(catalog) if f.rule in known else (*catalog, Choice(f.rule, f.title))
        reading = (readings or {}).get((f.endpoint, f.rule))
        rule = rules.get(f.rule)
        listed = tuple((spec.knob, spec.direction) for spec in rule.recommend) if rule else ()
        fixes = tuple(dict.fromkeys((*((r.knob, r.direction) for r in f.recommendations), *listed)))
        out.append(Question(len(out) + 1, t, f.endpoint, f, choices, knobs, reading, fixes))
    return out

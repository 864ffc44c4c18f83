"""Where each value of a frame lives in the decoder's lanes, worked out once per layout.

Decoding a poll only moves numbers; turning them into a `Frame` needs, for every scalar,
histogram, GPU and host figure, the lane and slot it sits in. That changes only when a body
redefines, moves or toggles series, so the decoder asks for a plan once per layout and set of
signals and reuses it poll after poll: a report that reads a dozen values of a day-long trace
never looks at the other few hundred. Apart from the decoder because it reads, never changes,
the decoder's state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from vtop.model import SeriesKey
from vtop.trace.lanes import DecodedSeries, Lane
from vtop.trace.metadata import GPU_INT, HOST_INT, GpuMeta, Meta, Path, ScrapeMeta

Ref = tuple[int, int, float]
"""lane, index in the lane, divisor."""


@dataclass(slots=True)
class ScrapePlan:
    meta: ScrapeMeta
    latency: Ref | None = None
    size: Ref | None = None
    scalars: list[tuple[SeriesKey, int, int, float]] = field(default_factory=list)
    hists: list[tuple[SeriesKey, tuple[float, ...], Ref, int, Ref | None]] = field(
        default_factory=list
    )


@dataclass(slots=True)
class Plan:
    scrapes: list[ScrapePlan]
    gpus: list[tuple[GpuMeta, list[tuple[str, Ref, bool]]]]
    host: list[tuple[str, Ref, bool]] | None


def plan_frame(
    meta: Meta,
    series: Mapping[int, DecodedSeries],
    present: Iterable[int],
    lanes: Sequence[Lane],
    only: frozenset[str] | None,
) -> Plan:
    """Where each value of a frame of the present series lives, under `meta`'s scrapes,
    GPUs and host; `only` keeps just those signals (see `Decoder.frame`)."""
    by_ep = {m.endpoint: ScrapePlan(m) for m in meta.scrapes}
    gpu_fields: dict[int, list[tuple[str, Ref, bool]]] = {}
    host: list[tuple[str, Ref, bool]] = []
    sums: dict[tuple[str | int, ...], Ref] = {}
    hists: list[DecodedSeries] = []
    skip = set() if only is None else {"g", "o", "l", "b"} - {_EXTRA_PARTS.get(x) for x in only}
    start = [lane.start for lane in lanes]
    for sid in present:
        s = series[sid]
        p = s.path
        kind = p[0]
        if kind in skip or (only is not None and kind in _SIGNAL_KINDS and p[2] not in only):
            continue
        ref = (s.lane, start[s.lane](s.pos), s.div)
        if kind == "g":
            name = cast(str, p[2])
            gpu_fields.setdefault(cast(int, p[1]), []).append((name, ref, name in GPU_INT))
        elif kind == "o":
            name = cast(str, p[1])
            host.append((name, ref, name in HOST_INT))
        else:
            sp = by_ep.get(cast(str, p[1]))
            if sp is None:
                continue
            if kind == "l":
                sp.latency = ref
            elif kind == "b":
                sp.size = ref
            elif kind == "s":
                sp.scalars.append((_key(p), *ref))
            elif kind == "hs":
                sums[p[1:]] = ref
            else:
                hists.append(s)
    for s in hists:
        sp = by_ep[cast(str, s.path[1])]
        ref = (s.lane, start[s.lane](s.pos), s.div)
        sp.hists.append((_key(s.path), s.bounds, ref, s.n, sums.get(s.path[1:])))
    for sp in by_ep.values():
        sp.scalars.sort(key=lambda x: x[0])
        sp.hists.sort(key=lambda x: x[0])
    gpus = [] if "g" in skip else [(g, sorted(gpu_fields.get(g.index, []))) for g in meta.gpus]
    return Plan(
        [by_ep[m.endpoint] for m in meta.scrapes],
        gpus,
        sorted(host) if meta.host and "o" not in skip else None,
    )


_SIGNAL_KINDS = frozenset(("s", "h", "hs"))
_EXTRA_PARTS = {"gpu": "g", "host": "o", "scrape_latency": "l", "scrape_bytes": "b"}
"""Names `only` takes for what is not a vLLM signal: without them a light frame skips these."""


def _key(p: Path) -> SeriesKey:
    return SeriesKey(cast(str, p[2]), cast(str, p[3]), cast(str, p[4]), cast(str, p[5]))

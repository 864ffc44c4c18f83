"""What a trace says besides numbers, checked field by field: the file may come from anyone.

A record body carries small JSON documents (`META`: the endpoints, GPUs and host a poll saw;
`EXTRA`: knobs, server info and events; `DEF`: a series' path) that a hostile or damaged file
can fill with anything. Every one is read here, apart from the codec that turns numbers into
lanes, so the checks have one home: each count is compared with the limits in `wire` before
anything is built from it, each field's type is checked, each string is cut and stripped of
control and bidi characters (`vtop.untrusted.clean`) before anything can print it, and
anything else raises `Damaged`.

The path vocabulary lives here too: a series path is what the encoder writes and what
`parse_path` accepts, so the two read one list.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, cast, get_args

from vtop import untrusted
from vtop.knobs import KnobValue
from vtop.model import EndpointInfo, Event, EventKind, Knob, Provenance
from vtop.trace import wire
from vtop.trace.wire import Damaged

GPU_FLOAT: Final = ("util_pct", "power_w", "power_limit_w", "temp_c", "sm_clock_mhz")
GPU_INT: Final = ("mem_used_bytes", "mem_total_bytes", "process_mem_bytes")
HOST_FLOAT: Final = ("cpu_pct", "self_cpu_pct")
HOST_INT: Final = ("mem_used_bytes", "mem_total_bytes", "self_rss_bytes")

Path = tuple[str | int, ...]
"""("s"|"h"|"hs", endpoint, signal, model, engine, label), ("l"|"b", endpoint),
("g", gpu index, field), ("o", field): scalar, histogram bins, histogram sum, scrape latency,
scrape size, GPU field, host field."""

_PROVENANCES: Final = frozenset(get_args(Provenance))
_EVENT_KINDS: Final = frozenset(get_args(EventKind))


@dataclass(frozen=True, slots=True)
class GpuMeta:
    index: int
    name: str
    uuid: str | None
    error: str | None


@dataclass(frozen=True, slots=True)
class ScrapeMeta:
    endpoint: str
    error: str | None
    vllm: bool
    info: Mapping[str, str]


@dataclass(slots=True)
class Meta:
    scrapes: tuple[ScrapeMeta, ...] = ()
    gpu_unavailable: str | None = "not recorded"
    gpus: tuple[GpuMeta, ...] = ()
    host: bool = False


def parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise Damaged(f"bad JSON in a record: {exc}") from None


def _str(v: Any, limit: int = 1000) -> str:
    if not isinstance(v, str):
        raise Damaged("expected a string")
    return untrusted.clean(v, limit)


def _opt_str(v: Any, limit: int = 1000) -> str | None:
    return None if v is None else _str(v, limit)


def parse_path(doc: Any) -> Path:
    if not isinstance(doc, list) or not doc:
        raise Damaged("bad series path")
    kind = doc[0]
    if kind in ("s", "h", "hs") and len(doc) == 6:
        return (kind, *(_str(x, 1000) for x in doc[1:]))
    if kind in ("l", "b") and len(doc) == 2:
        return (kind, _str(doc[1]))
    gpu_field = len(doc) == 3 and (doc[2] in GPU_FLOAT or doc[2] in GPU_INT)
    if kind == "g" and gpu_field and isinstance(doc[1], int) and 0 <= doc[1] < wire.MAX_GPUS:
        return ("g", doc[1], doc[2])
    if kind == "o" and len(doc) == 2 and (doc[1] in HOST_FLOAT or doc[1] in HOST_INT):
        return ("o", doc[1])
    raise Damaged("bad series path")


def parse_meta(doc: Any) -> Meta:
    try:
        scrapes = doc["scrapes"]
        unavailable, gpus = doc["gpu"]
        host = doc["host"]
        if len(scrapes) > wire.MAX_SCRAPES or len(gpus) > wire.MAX_GPUS:
            raise Damaged("too many endpoints or GPUs")
        metas = []
        for ep, error, vllm, info in scrapes:
            if not isinstance(info, dict) or len(info) > 200 or not isinstance(vllm, bool):
                raise Damaged("bad scrape metadata")
            labels = {_str(k, 200): _str(v, 200) for k, v in info.items()}
            metas.append(ScrapeMeta(_str(ep), _opt_str(error), vllm, labels))
        gms = []
        for index, name, uuid, error in gpus:
            if not isinstance(index, int) or not 0 <= index < wire.MAX_GPUS:
                raise Damaged("bad GPU index")
            gms.append(GpuMeta(index, _str(name, 200), _opt_str(uuid, 200), _opt_str(error)))
        return Meta(tuple(metas), _opt_str(unavailable), tuple(gms), bool(host))
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, Damaged):
            raise
        raise Damaged("bad metadata") from None


def _knob_value(v: Any) -> KnobValue:
    if v is None or isinstance(v, bool | int | float):
        return cast(KnobValue, v)
    return _str(v, 200)


def parse_knobs(doc: Any) -> dict[str, dict[str, Knob]]:
    if not isinstance(doc, dict) or len(doc) > wire.MAX_SCRAPES:
        raise Damaged("bad knobs")
    out: dict[str, dict[str, Knob]] = {}
    for ep, knobs in doc.items():
        if not isinstance(knobs, dict) or len(knobs) > 500:
            raise Damaged("bad knobs")
        parsed = {}
        for name, triple in knobs.items():
            if not isinstance(triple, list) or len(triple) != 3:
                raise Damaged("bad knob")
            value, prov, detail = triple
            if prov not in _PROVENANCES:
                raise Damaged(f"bad knob provenance {untrusted.clean(prov, 40)!r}")
            n = _str(name, 100)
            parsed[n] = Knob(n, _knob_value(value), prov, _str(detail, 500))
        out[_str(ep)] = parsed
    return out


def parse_servers(doc: Any) -> dict[str, EndpointInfo]:
    if not isinstance(doc, dict) or len(doc) > wire.MAX_SCRAPES:
        raise Damaged("bad server info")
    out = {}
    for ep, triple in doc.items():
        if not isinstance(triple, list) or len(triple) != 3:
            raise Damaged("bad server info")
        version, models, max_len = triple
        if not isinstance(models, list) or len(models) > 1000:
            raise Damaged("bad server models")
        if max_len is not None and (not isinstance(max_len, int) or isinstance(max_len, bool)):
            raise Damaged("bad max_model_len")
        out[_str(ep)] = EndpointInfo(
            _opt_str(version, 40), tuple(_str(m, 200) for m in models), max_len
        )
    return out


def parse_event(doc: Any) -> Event:
    if not isinstance(doc, list) or len(doc) != 4:
        raise Damaged("bad event")
    t, kind, ep, message = doc
    if not isinstance(t, int | float) or isinstance(t, bool) or not 0 <= t <= wire.MAX_T_US / 1e6:
        raise Damaged("bad event time")
    if kind not in _EVENT_KINDS:
        raise Damaged("bad event kind")
    return Event(float(t), kind, _str(ep), _str(message))

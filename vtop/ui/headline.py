"""The header's fields as plain strings, from the monitor and the source (no Textual here).

Time on screen comes from the frames (`Store.now`), never from the wall clock, so a replayed
trace shows its own uptime and a snapshot test with scripted frames draws the same bytes on
every run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from vtop import durations, fmt
from vtop.model import Severity
from vtop.monitor import EndpointView
from vtop.sources.status import ConnectionStatus
from vtop.ui.thresholds import FALLBACK, Table, level


@dataclass(frozen=True, slots=True)
class Headline:
    endpoint: str
    model: str
    version: str
    uptime: str
    status: str
    status_level: Severity
    latency: str
    latency_level: Severity
    latency_s: float | None = field(default=None, compare=False)
    """The poll's latency in seconds (None when the poll failed); not shown, so two headlines
    that read the same are equal whatever it is."""
    t: float | None = field(default=None, compare=False)
    """When the poll was taken (the frame's time); not shown either."""


def short_url(url: str) -> str:
    """`http://localhost:8000` -> `localhost:8000` (the scheme and a bare path add nothing)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # `[::1` from a Prometheus instance label: not a URL either
        return url
    if not parts.netloc:
        return url  # not a URL: a Prometheus instance label (host:port), kept as it is
    text = parts.netloc
    if parts.path not in ("", "/"):
        text += parts.path
    if parts.scheme and parts.scheme != "http":
        text = f"{parts.scheme}://{text}"  # https://, and sim:// for the simulator
    return text


def model_of(view: EndpointView) -> str:
    """The served model: what /v1/models says, else the `model_name` label on the page."""
    models = list(view.server.models) or sorted({m for m, _ in view.store.engines() if m})
    if not models:
        return fmt.DASH
    name = models[0].rstrip("/").rsplit("/", 1)[-1] or models[0]  # Qwen/Qwen2.5-7B -> Qwen2.5-7B
    return name + (f" +{len(models) - 1}" if len(models) > 1 else "")


def model_forms(model: str) -> tuple[str, ...]:
    """The model's name and its shorter forms, cut at its dashes, longest first:
    `Qwen2.5-7B-Instruct +1` -> `Qwen2.5-7B +1` -> `Qwen2.5 +1` (the `+N` of other models kept)."""
    name, sep, more = model.partition(" +")
    tail = f"{sep}{more}" if sep else ""
    parts = name.split("-")
    return tuple("-".join(parts[:n]) + tail for n in range(len(parts), 0, -1))


def headline(view: EndpointView, status: ConnectionStatus, table: Table = FALLBACK) -> Headline:
    """The header for one endpoint; `status` is how the source says its connection stands."""
    store = view.store
    now = store.now
    start = store.last("api_start_time")
    uptime = durations.compact(now - start) if now is not None and start is not None else fmt.DASH
    last = view.last
    latency = last.latency_s if last is not None else None
    if status.healthy:
        mark, lvl = "●", Severity.OK
    elif status.lost:
        mark, lvl = "↻", Severity.CRITICAL
    else:
        mark, lvl = "○", Severity.WARNING
    version = view.server.version
    return Headline(
        endpoint=short_url(store.endpoint),
        model=model_of(view),
        version=f"vLLM {version}" if version else "vLLM ?",
        uptime=f"up {uptime}",
        status=f"{mark} {status.text}",
        status_level=lvl,
        # Two digits: the poll's own latency jitters, and each new digit is a repaint.
        latency=f"poll {fmt.seconds(latency, digits=2)}" if last is not None and last.ok else "",
        latency_level=level("scrape_latency", latency, table)
        if last is not None and last.ok
        else Severity.OK,
        latency_s=latency if last is not None and last.ok else None,
        t=now,
    )

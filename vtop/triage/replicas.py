"""Replicas compared: endpoints that serve the same model, and how far apart their load is.

The rule engine judges one endpoint's store at a time, but "one replica's KV full while
another's is empty" (issue 7) is only visible across endpoints. So after each frame the
monitor (and the rule-test runner) hands every endpoint's latest reading to `compare`, and
writes what it returns into each replica's own store (`Store.put`) as ordinary per-poll
series. Rules then read them like any other signal, with medians over a window and hold
times, and the finding appears wherever findings appear (the TUI, every report format,
recordings) without any consumer knowing replicas exist. Replay recomputes them too: it feeds
the recorded frames through the same monitor, so a trace never needs to carry them.

Replicas are endpoints whose servers name the same models (`/v1/models`, or the model labels
a Prometheus source sees); an endpoint whose models are unknown is never grouped, because two
servers of different models are not meant to carry the same load. A replica counts only while
its latest poll succeeded and is recent: a dead peer is not an idle one. The baseline is the
emptiest replica *with room*, one with no queue: a replica that queues is not idle, whatever
its KV or batch (a smaller `max_num_seqs` there is that server's budget-too-small, not a
routing fault), so replicas of one model configured differently are not called unbalanced.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from vtop.signals.store import Store

STALE_S = 60.0
"""A peer whose latest successful poll is older than this (before the newest) is left out."""

KV_SPREAD = "replica_kv_spread"
RUNNING_RATIO = "replica_running_ratio"
KV_MIN = "replica_kv_min"
PEER = "replica_peer"
SIGNALS = (KV_SPREAD, RUNNING_RATIO, KV_MIN)
"""The per-poll series `apply` writes (derived signals in `vtop.triage.derived`)."""


@dataclass(frozen=True, slots=True)
class Member:
    """One endpoint as the comparison sees it."""

    endpoint: str
    models: tuple[str, ...]
    store: Store
    ok: bool
    """Its latest poll succeeded."""


@dataclass(frozen=True, slots=True)
class Standing:
    """How one replica compares with the replicas of its model at the latest poll."""

    kv_spread: float | None
    """Its KV usage minus the emptiest replica's with no queue (itself included)."""
    running_ratio: float | None
    """Its running requests over the idlest replica's with no queue (at least 1)."""
    kv_min: float | None
    """KV usage of the emptiest replica of the model with no queue."""
    peer: str | None
    """The emptiest other replica (least KV, then fewest running, then name)."""


NONE = Standing(None, None, None, None)


def group(models: Iterable[str]) -> tuple[str, ...] | None:
    """The key replicas share: the set of models served; None (never grouped) when unknown."""
    names = tuple(sorted({m for m in models if m}))
    return names or None


def compare(members: Iterable[Member]) -> dict[str, Standing]:
    """Each member's standing among the other members of its group (NONE when alone)."""
    members = list(members)
    newest = max((m.store.now for m in members if m.store.now is not None), default=None)
    readings: dict[tuple[str, ...], list[tuple[str, float | None, float | None, bool]]] = {}
    for m in members:
        g = group(m.models)
        now = m.store.now
        if g is None or not m.ok or now is None or newest is None or newest - now > STALE_S:
            continue
        kv, running = m.store.last("kv_usage"), m.store.last("running")
        if kv is None and running is None:
            continue
        waiting = m.store.last("waiting")
        readings.setdefault(g, []).append((m.endpoint, kv, running, not waiting))
    out = {m.endpoint: NONE for m in members}
    for rows in readings.values():
        if len(rows) < 2:
            continue
        kvs = [kv for _, kv, _, room in rows if kv is not None and room]
        runs = [r for _, _, r, room in rows if r is not None and room]
        kv_min = min(kvs) if kvs and sum(kv is not None for _, kv, _, _ in rows) >= 2 else None
        run_min = min(runs) if runs and sum(r is not None for _, _, r, _ in rows) >= 2 else None
        for name, kv, running, _ in rows:
            others = [(k, r, n) for n, k, r, room in rows if n != name and k is not None and room]
            # the emptiest other replica: least KV, then fewest running, then by name
            peer = min(
                others, key=lambda o: (o[0], o[1] if o[1] is not None else 0.0, o[2]), default=None
            )
            out[name] = Standing(
                kv_spread=None if kv is None or kv_min is None else kv - kv_min,
                running_ratio=(
                    None if running is None or run_min is None else running / max(run_min, 1.0)
                ),
                kv_min=kv_min,
                peer=peer[2] if peer is not None else None,
            )
    return out


def apply(store: Store, standing: Standing) -> None:
    """Write a replica's standing at its latest poll (unknowns as unknown)."""
    store.put(KV_SPREAD, standing.kv_spread)
    store.put(RUNNING_RATIO, standing.running_ratio)
    store.put(KV_MIN, standing.kv_min)
    if standing.peer is None:
        store.context.pop(PEER, None)
    else:
        store.context[PEER] = standing.peer


def update(members: Iterable[Member], fed: Mapping[str, Store]) -> None:
    """Compare `members` and write the standings of those polled this frame (`fed`)."""
    for endpoint, standing in compare(members).items():
        store = fed.get(endpoint)
        if store is not None:
            apply(store, standing)

"""The host vtop runs on: its CPU and memory, vtop's own cost, and the local vLLM server.

`HostSampler.read()` is called once per poll from a worker thread, so it must be cheap and
must not block: CPU percentages are deltas between two calls (the first call has no delta
and says `None`, not a made-up 0). The host's CPU delta is kept here rather than in
`psutil.cpu_percent(interval=None)`, whose baseline is kept per calling *thread*: a poll loop
that runs on a thread pool would get deltas over random windows. vtop's own CPU is the
per-`Process` delta psutil keeps on the instance, in percent of one core (as `top` shows it).
Host memory "used" is total − available: what processes hold, not the page cache.

`find_vllm_process(port)` answers "which local process serves this endpoint?", so that the
knobs no metric exposes (`max_num_seqs`, `max_num_batched_tokens`, ...) can be read from the
server's command line, and so that NVML can attribute GPU memory to the server's processes.
It is a discovery step (on connect, after a restart), not a per-poll one. The server is a
process whose argv is `vllm serve …` or `python -m vllm.entrypoints.openai.api_server …`
whose parent is not one too: vLLM's forked children (engine core, workers, extra API
servers) keep the parent's argv unless setproctitle renames them, and must not be taken for
the server. It is matched to the port by a listening socket in its process tree when the
sockets can be read (same user, or root), and else by its `--port` (default 8000).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import psutil

from vtop.model import HostReading, Knob
from vtop.sources.cmdline import is_vllm_server_argv, parse_vllm_argv, redact_argv

log = logging.getLogger(__name__)

VLLM_DEFAULT_PORT = 8000


class HostSampler:
    """Host CPU / memory and vtop's own CPU / RSS, by deltas between calls."""

    def __init__(self, *, pid: int | None = None) -> None:
        self._self = psutil.Process(pid)
        self._last_cpu: dict[str, float] | None = None
        self._self_primed = False

    def read(self) -> HostReading:
        """One reading; CPU fields are None on the first call (no interval yet)."""
        used, total = _virtual_memory()
        return HostReading(
            cpu_pct=self._host_cpu(),
            mem_used_bytes=used,
            mem_total_bytes=total,
            self_cpu_pct=self._self_cpu(),
            self_rss_bytes=self._self_rss(),
        )

    def _host_cpu(self) -> float | None:
        try:
            now: dict[str, float] = psutil.cpu_times()._asdict()
        except (OSError, psutil.Error):
            return None
        last, self._last_cpu = self._last_cpu, now
        if last is None:
            return None
        total = _total(now) - _total(last)
        idle = _idle(now) - _idle(last)
        if total <= 0:
            return None
        return round(max(0.0, min(100.0, 100.0 * (total - idle) / total)), 1)

    def _self_cpu(self) -> float | None:
        try:
            pct = self._self.cpu_percent(interval=None)
        except psutil.Error:
            return None
        primed, self._self_primed = self._self_primed, True
        return float(pct) if primed else None

    def _self_rss(self) -> int | None:
        try:
            return int(self._self.memory_info().rss)
        except psutil.Error:
            return None


def _virtual_memory() -> tuple[int | None, int | None]:
    try:
        mem = psutil.virtual_memory()
    except (OSError, psutil.Error):
        return None, None
    return int(mem.total - mem.available), int(mem.total)


def _total(times: Mapping[str, float]) -> float:
    # On Linux `guest` / `guest_nice` are already counted in `user` / `nice` (as psutil does).
    return sum(times.values()) - times.get("guest", 0.0) - times.get("guest_nice", 0.0)


def _idle(times: Mapping[str, float]) -> float:
    return times.get("idle", 0.0) + times.get("iowait", 0.0)


@dataclass(frozen=True, slots=True)
class VllmProcess:
    """A local vLLM API server process tree."""

    pid: int
    """The server's root process (the one started as `vllm serve …`)."""
    pids: tuple[int, ...]
    """The root and its descendants (engine core, workers): whose GPU memory is the server's."""
    argv: tuple[str, ...]
    """The root's command line, with secret values (`--api-key`) redacted."""
    port: int
    """The port it serves: the one asked for, or in a listing its `--port` (default 8000)."""
    matched_by: Literal["socket", "argv"]
    """`socket`: the tree listens on `port`; `argv`: only its `--port` says so (the sockets
    are another user's, in another network namespace, or not bound yet while loading)."""
    knobs: Mapping[str, Knob] = field(default_factory=dict)
    """Knobs from the command line (and its `--config`), provenance `process`."""


@dataclass(frozen=True, slots=True)
class _Candidate:
    proc: psutil.Process
    argv: tuple[str, ...]
    tree: tuple[psutil.Process, ...]
    knobs: Mapping[str, Knob]
    listening: frozenset[int] | None

    @property
    def argv_port(self) -> int:
        value = self.knobs["port"].value if "port" in self.knobs else VLLM_DEFAULT_PORT
        return value if isinstance(value, int) else VLLM_DEFAULT_PORT

    def as_process(self, port: int) -> VllmProcess:
        listens = self.listening is not None and port in self.listening
        return VllmProcess(
            pid=self.proc.pid,
            pids=tuple(p.pid for p in self.tree),
            argv=redact_argv(self.argv),
            port=port,
            matched_by="socket" if listens else "argv",
            knobs=self.knobs,
        )


def find_vllm_process(port: int) -> VllmProcess | None:
    """The local vLLM API server serving `port`, or None (remote server, other user, none).

    A server whose process tree listens on `port` wins; else one whose `--port` is `port`.
    Never raises: processes that vanish or deny access while being looked at are skipped.
    """
    candidates = _candidates()
    for cand in candidates:
        if cand.listening is not None and port in cand.listening:
            return cand.as_process(port)
    for cand in candidates:
        if cand.argv_port == port:
            return cand.as_process(port)
    return None


def local_vllm_servers() -> list[VllmProcess]:
    """Every local vLLM API server (roots only, never their children), by pid."""
    return [cand.as_process(cand.argv_port) for cand in _candidates()]


def _candidates() -> list[_Candidate]:
    out = []
    for proc, argv in _server_roots():
        tree = _tree(proc)
        knobs = parse_vllm_argv(argv, pid=proc.pid, cwd=_cwd(proc))
        out.append(_Candidate(proc, tuple(argv), tuple(tree), knobs, _listening_ports(tree)))
    return out


def _server_roots() -> list[tuple[psutil.Process, list[str]]]:
    """Processes with a vLLM server argv whose ancestors have none (not a fork child)."""
    servers: dict[int, tuple[psutil.Process, list[str]]] = {}
    for proc in psutil.process_iter(["cmdline"]):
        argv = proc.info.get("cmdline")
        if argv and is_vllm_server_argv(argv):
            servers[proc.pid] = (proc, list(argv))
    roots = []
    for pid, (proc, argv) in servers.items():
        if not _has_ancestor_in(proc, servers.keys()):
            roots.append((proc, argv))
        else:
            log.debug("pid %d has a vLLM server ancestor: a child, not the server", pid)
    return sorted(roots, key=lambda item: item[0].pid)


def _has_ancestor_in(proc: psutil.Process, pids: Iterable[int]) -> bool:
    wanted = set(pids)
    try:
        return any(parent.pid in wanted for parent in proc.parents())
    except psutil.Error:
        return False


def _tree(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return [proc]


def _cwd(proc: psutil.Process) -> str | None:
    try:
        return proc.cwd()
    except psutil.Error:
        return None


def _listening_ports(tree: list[psutil.Process]) -> frozenset[int] | None:
    """TCP ports the tree listens on; None when no process's sockets could be read."""
    ports: set[int] = set()
    readable = False
    for proc in tree:
        try:
            conns = proc.net_connections(kind="tcp")
        except (psutil.Error, AttributeError):  # AttributeError: psutil < 6.0 (`connections`)
            continue
        readable = True
        ports.update(c.laddr.port for c in conns if c.status == psutil.CONN_LISTEN and c.laddr)
    return frozenset(ports) if readable else None


def tree_pids(pid: int) -> tuple[int, ...]:
    """A process and its descendants now (vLLM starts workers after the API server)."""
    try:
        return tuple(p.pid for p in _tree(psutil.Process(pid)))
    except psutil.Error:
        return ()

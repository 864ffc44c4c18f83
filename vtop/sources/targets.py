"""Which endpoints to watch: `--url` (repeated), `--targets FILE`, and `--discover`.

A fleet outgrows a command line, so the endpoints can live in a file, one per line, each
optionally followed by labels, with `#` comments anywhere:

    # gpu-node-a, two replicas
    http://10.0.0.5:8000   name=a0  max_num_seqs=128
    10.0.0.5:8001          name=a1  zone="eu west"     # a bare host:port means http://

The file is checked whole before anything is watched, and a bad line is one line naming the
file and the line (`fleet.txt:3: 'max_num_seqs' must be a whole number, got 'lots'`): a
typo in line 40 of a fleet file must not silently drop a server from view.

Labels are free-form `name=value` pairs (Prometheus label-name syntax; values bare or
double-quoted with backslash escapes). Two kinds mean something to vtop: knob names that no
metric exposes (`max_num_seqs`, `max_num_batched_tokens`, ...) set that endpoint's knob, as
`--max-num-seqs` does for all of them, with the file and line as provenance; every label is
kept on the `Target` for whoever shows the endpoint (the fleet view's names, the rule export's
per-instance knob vectors).

`discover()` turns the vLLM API servers running on this host (`local_vllm_servers()`, which
tells a server from its forked children) into targets, so `vtop --discover` needs no URL.

This module is what the endpoints are, not how they are asked for: the flags (`--targets`,
`--discover`) and turning them, with `--url`, into one list are vtop/cli/targets_args.py's,
so the sources never reach up into the command line (`vtop rules export` reads targets
files too).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from vtop import knobs, untrusted
from vtop.files import read_regular
from vtop.model import Knob
from vtop.sources.host import VllmProcess, local_vllm_servers
from vtop.sources.urls import base_url, check_url, redact_url

KNOB_LABELS: Final = knobs.read_at("label")
"""Labels that set a knob of their endpoint (`vtop.knobs`, where `label`): what no metric
exposes, and `kv_capacity_tokens`, which the page has only as labels that PromQL cannot read as
a number (`vtop rules export` needs it per instance)."""

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
_WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "[::]", "*"})


class TargetsError(ValueError):
    """One line: `FILE:LINE: what is wrong` (or what is wrong with the file as a whole)."""


@dataclass(frozen=True, slots=True)
class Target:
    """One endpoint to watch, where it was named, and its labels."""

    url: str
    """The server's base URL as `--url` takes it (`http://host:port`)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    where: str = "--url"
    """`FILE:LINE`, `--url` or `discovered: pid N`: provenance for knobs and for errors."""

    @property
    def endpoint(self) -> str:
        """The name the endpoint goes by in frames (the URL, without credentials)."""
        return redact_url(base_url(self.url))

    @property
    def instance(self) -> str:
        """`host:port`, as Prometheus's `instance` label names the same server."""
        parts = urlsplit(base_url(self.url))
        port = parts.port or (443 if parts.scheme == "https" else 80)
        host = parts.hostname or ""
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def knobs(self) -> dict[str, Knob]:
        """The knobs this target's labels set (already validated when the file was read)."""
        out: dict[str, Knob] = {}
        for name in KNOB_LABELS:
            if name in self.labels:
                value = knobs.parse(name, self.labels[name])
                out[name] = Knob(name, value, "flag", f"{self.where} {name}={self.labels[name]}")
        return out


def _tokens(line: str, where: str) -> list[str]:
    """Split a line at whitespace, keeping double-quoted values whole; stop at a comment."""
    out: list[str] = []
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c.isspace():
            i += 1
            continue
        if c == "#":
            break
        buf: list[str] = []
        while i < n and not line[i].isspace():
            if line[i] == '"':
                i += 1
                while True:
                    if i >= n:
                        raise TargetsError(f"{where}: unterminated quoted value")
                    ch = line[i]
                    if ch == "\\" and i + 1 < n:
                        nxt = line[i + 1]
                        buf.append({"n": "\n", "t": "\t"}.get(nxt, nxt))
                        i += 2
                        continue
                    i += 1
                    if ch == '"':
                        break
                    buf.append(ch)
                continue
            buf.append(line[i])
            i += 1
        out.append("".join(buf))
    return out


def _labels(tokens: Sequence[str], where: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    for tok in tokens:
        name, sep, value = tok.partition("=")
        if not sep:
            raise TargetsError(f"{where}: expected name=value after the URL, got {tok!r}")
        if not _LABEL_NAME.match(name):
            raise TargetsError(f"{where}: {name!r} is not a label name (letters, digits, _)")
        if name in labels:
            raise TargetsError(f"{where}: label {name!r} given twice")
        if name in KNOB_LABELS:
            try:
                knobs.parse(name, value)  # its type and range: no nan, no 1e30 sequences
            except ValueError as exc:
                raise TargetsError(f"{where}: {exc}") from None
        labels[name] = untrusted.clean(value, 200)  # shown as a label, and a file is anyone's
    return labels


def parse_targets(text: str, path: str) -> list[Target]:
    """Targets from the text of a targets file; `TargetsError` names `path:line`."""
    targets: list[Target] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        where = f"{path}:{lineno}"
        tokens = _tokens(line, where)
        if not tokens:
            continue
        url, rest = tokens[0], tokens[1:]
        if "=" in url and "://" not in url:
            raise TargetsError(f"{where}: a line starts with the URL, got {url!r}")
        problem = check_url(url)
        if problem is not None:
            raise TargetsError(f"{where}: {problem}")
        target = Target(url, _labels(rest, where), where)
        key = target.endpoint
        if key in seen:
            raise TargetsError(f"{where}: {key} is already listed on line {seen[key]}")
        seen[key] = lineno
        targets.append(target)
    return targets


def load_targets(path: str | Path) -> list[Target]:
    """Read a targets file; any problem is one `TargetsError` line naming the file."""
    name = str(path)
    try:
        raw = read_regular(path)  # a FIFO would block a plain read forever
    except OSError as exc:
        raise TargetsError(f"{name}: cannot read the targets file: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise TargetsError(f"{name}:{line}: not UTF-8 text") from None
    targets = parse_targets(text, name)
    if not targets:
        raise TargetsError(f"{name}: no targets in the file (one URL per line)")
    return targets


def discovered_url(proc: VllmProcess) -> str:
    """The URL a local server answers on: its `--host` unless that is a wildcard."""
    host_knob = proc.knobs.get("host")
    host = str(host_knob.value) if host_knob is not None and host_knob.value else ""
    if host in _WILDCARD_HOSTS:
        host = "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{proc.port}"


def discover(servers: Iterable[VllmProcess] | None = None) -> list[Target]:
    """The vLLM API servers on this host as targets (`local_vllm_servers()` by default)."""
    found = local_vllm_servers() if servers is None else list(servers)
    out: list[Target] = []
    for proc in found:
        labels = {"pid": str(proc.pid), "matched_by": proc.matched_by}
        out.append(Target(discovered_url(proc), labels, f"discovered: pid {proc.pid}"))
    return out


def describe(proc: VllmProcess, width: int = 120) -> str:
    """One line for `vtop --discover`: pid, URL, how it was matched, its command line."""
    how = "listening" if proc.matched_by == "socket" else "by --port"
    argv = " ".join([Path(proc.argv[0]).name, *proc.argv[1:]] if proc.argv else [])
    line = f"pid {proc.pid}  {discovered_url(proc)}  ({how})  {argv}"
    return untrusted.clean(line, width)  # any user of the host may write a command line


def merge(*groups: Iterable[Target]) -> list[Target]:
    """Targets from every source in order, each endpoint once (the first mention wins)."""
    out: list[Target] = []
    seen: set[str] = set()
    for group in groups:
        for target in group:
            if target.endpoint not in seen:
                seen.add(target.endpoint)
                out.append(target)
    return out

"""The config file: what a user would otherwise type on every command line.

`$XDG_CONFIG_HOME/vtop/config.toml` (`~/.config/vtop/config.toml`) when it exists, or the file
`--config FILE` names (which must exist). TOML, read with the standard library's `tomllib`:

    interval = 2                      # poll interval, seconds
    headers = ["X-Team: infer"]       # extra request headers (VTOP_API_KEY still sets a token)
    ca_cert = "/etc/ssl/private-ca.pem"
    rules = ["~/vtop-rules"]          # extra rule directories

    [goals]                           # what the advice optimises (see --max-ttft-s)
    max_ttft_s = 2.0
    max_itl_ms = 60
    allow_preemption = false

    [[endpoint]]                      # watched when the command line names no server
    url = "http://gpu-1:8000"
    labels = { max_num_seqs = 128, team = "search" }

Every value only sets a default: a flag on the command line wins (`--header` and `--rules`
add to the file's). An error is one line naming the file, the line and the key
(`config.toml:7: goals.max_itl_ms: expected a number above 0, up to 60000 ms`), and an unknown
key is an error too, so a typo is never silently ignored.
"""

from __future__ import annotations

import argparse
import os
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vtop import files, untrusted
from vtop.cli import ranges
from vtop.sources.targets import Target
from vtop.sources.urls import check_url

FLAG = "--config"
MAX_BYTES = 1 << 20
"""A config file is a few hundred bytes; one larger than this is not one."""


class ConfigError(Exception):
    """One line: `FILE:LINE: KEY: what is wrong`."""


def default_path(env: Mapping[str, str] = os.environ) -> Path:
    """`$XDG_CONFIG_HOME/vtop/config.toml`, `~/.config/vtop/config.toml` without it."""
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "vtop" / "config.toml"


def named_path(words: Sequence[str]) -> str | None:
    """The FILE of `--config FILE` / `--config=FILE` among the command line's words."""
    for i, word in enumerate(words):
        if word == FLAG and i + 1 < len(words):
            return words[i + 1]
        if word.startswith(FLAG + "="):
            return word[len(FLAG) + 1 :]
        if word == "--":
            break
    return None


@dataclass(frozen=True, slots=True)
class _Key:
    """How one key is checked and which flag's default it sets."""

    dest: str
    check: Callable[[Any], Any]


def _number(spec: ranges.Number) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"expected a number ({spec.shown()})")
        try:
            return spec(str(value))
        except argparse.ArgumentTypeError as exc:
            raise ValueError(str(exc)) from None

    return check


def _strings(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("expected a list of strings")
    return [os.path.expanduser(v) for v in value]


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("expected a string")
    return os.path.expanduser(value)


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("expected true or false")
    return value


TOP: dict[str, _Key] = {
    "interval": _Key("interval", _number(ranges.INTERVAL)),
    "headers": _Key("header", _strings),
    "ca_cert": _Key("ca_cert", _string),
    "rules": _Key("rules", _strings),
}
GOALS: dict[str, _Key] = {
    "max_ttft_s": _Key("max_ttft_s", _number(ranges.MAX_TTFT_S)),
    "max_itl_ms": _Key("max_itl_ms", _number(ranges.MAX_ITL_MS)),
    "allow_preemption": _Key("allow_preemption", _boolean),
}


@dataclass(frozen=True, slots=True)
class Config:
    """A config file read and checked: each flag's default, and the endpoints it names."""

    path: str
    defaults: dict[str, Any]
    endpoints: list[Target]


def load(path: str | Path, *, required: bool) -> Config | None:
    """Read and check the file; None when it does not exist and was not `required`."""
    shown = untrusted.clean(str(path), 200)
    try:
        data = files.read_regular(str(path), MAX_BYTES)
    except FileNotFoundError:
        if required:
            raise ConfigError(f"{shown}: no such file") from None
        return None
    except OSError as exc:
        raise ConfigError(f"{shown}: cannot read it: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise ConfigError(f"{shown}: larger than {MAX_BYTES // 1024} KiB: not a config file")
    text = data.decode("utf-8", errors="replace")
    try:
        tree = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        where = f"{shown}:{line.group(1)}" if line else shown
        raise ConfigError(f"{where}: not valid TOML: {str(exc).split(' (at')[0]}") from None
    lines = text.splitlines()

    def fail(key: str, problem: str, nth: int = 0) -> ConfigError:
        return ConfigError(f"{shown}:{_line_of(lines, key, nth=nth)}: {key}: {problem}")

    defaults: dict[str, Any] = {}
    endpoints: list[Target] = []
    for key, value in tree.items():
        if key == "goals":
            if not isinstance(value, dict):
                raise fail(key, "expected a table: [goals]")
            _take(value, GOALS, "goals.", defaults, fail)
        elif key == "endpoint":
            if not isinstance(value, list):
                raise fail(key, "expected tables: [[endpoint]]")
            endpoints += [
                _endpoint(e, fail, f"{shown}:{_line_of(lines, 'endpoint.url', nth=i)}", i)
                for i, e in enumerate(value)
            ]
        else:
            _take({key: value}, TOP, "", defaults, fail)
    return Config(shown, defaults, endpoints)


def _take(
    table: Mapping[str, Any],
    keys: Mapping[str, _Key],
    prefix: str,
    into: dict[str, Any],
    fail: Callable[[str, str], ConfigError],
) -> None:
    for name, value in table.items():
        spec = keys.get(name)
        if spec is None:
            raise fail(prefix + name, f"unknown key; known: {', '.join(prefix + k for k in keys)}")
        try:
            into[spec.dest] = spec.check(value)
        except ValueError as exc:
            raise fail(prefix + name, str(exc)) from None


def _endpoint(entry: Any, fail: Callable[..., ConfigError], where: str, index: int) -> Target:
    """One `[[endpoint]]` table as a `Target` named `FILE:LINE` (its knob labels' provenance)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
        raise fail("endpoint.url", f'endpoint {index + 1} needs url = "http://host:port"')
    unknown = set(entry) - {"url", "labels"}
    if unknown:
        raise fail(f"endpoint.{sorted(unknown)[0]}", "unknown key; known: url, labels", index)
    url = entry["url"]
    problem = check_url(url)
    if problem is not None:
        raise fail("endpoint.url", problem, index)
    labels = entry.get("labels", {})
    if not isinstance(labels, dict) or any(isinstance(v, dict | list) for v in labels.values()):
        raise fail("endpoint.labels", "expected a table of names and plain values", index)
    text = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in labels.items()}
    return Target(url, text, where=where)


def _line_of(lines: list[str], dotted: str, *, nth: int = 0) -> int:
    """The line (from 1) that sets `dotted` (`goals.max_itl_ms`): its key under its table's
    header (the `nth` such table, for `[[endpoint]]`); the table's header, else line 1."""
    table, _, key = dotted.rpartition(".")
    current, seen, header_line = "", -1, 0
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        header = re.fullmatch(r"\[\[?\s*([\w.-]+)\s*\]\]?(\s*#.*)?", line)
        if header:
            current = header.group(1)
            if current == table:
                seen += 1
                header_line = number if seen == nth else header_line
            continue
        in_table = current == table and (not table or seen == nth)
        if in_table and re.match(rf"{re.escape(key)}\s*=", line):
            return number
    return header_line or 1


def apply(parser: argparse.ArgumentParser, words: Sequence[str]) -> Config | None:
    """Read the config file the words name (else the default one, if any) and make its
    values the parser's defaults; `ConfigError` for a bad file."""
    named = named_path(words)
    config = load(named if named is not None else default_path(), required=named is not None)
    if config is not None:
        parser.set_defaults(**config.defaults, config_endpoints=config.endpoints)
    return config


def add_argument(group: argparse._ArgumentGroup) -> None:
    """`--config FILE` (read before the other flags, by `apply`)."""
    group.add_argument(
        FLAG,
        metavar="FILE",
        help="read defaults from FILE (TOML) instead of $XDG_CONFIG_HOME/vtop/config.toml: "
        "goals, endpoints, headers, CA, interval, rule directories",
    )

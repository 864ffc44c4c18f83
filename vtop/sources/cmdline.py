"""The vLLM server's knobs, read from its command line.

No metric exposes `max_num_seqs` or `max_num_batched_tokens`, and they are exactly what the
triage rules recommend changing; the best source of their current values is the running
server's own argv (`vllm serve MODEL …`, `python -m vllm.entrypoints.openai.api_server …`,
`python -m vllm.entrypoints.cli.main serve …`), plus the YAML file of its `--config`, which
vLLM reads with the command line taking precedence.

Why a small hand parser rather than vLLM's argparse: vtop does not depend on vLLM (it watches
servers of any version, often on another host), and vLLM's flag set changes every release.
So only the knobs vtop reasons about are recognised; everything else is skipped without error.
The parser follows argparse's habits where it matters: `--flag v` and `--flag=v`; underscores
or dashes (vLLM's parser accepts both); the last occurrence wins; `--no-X` for boolean X; old
releases' `--enable-chunked-prefill False`; the short aliases `-tp`, `-pp`, `-dp`, `-q`, `-asc`;
human-readable integers (`32k` = 32000, `32K` = 32768) as vLLM accepts them.

Secrets never leave this module: values of `--api-key`, `--hf-token` and any flag named like a
key, token, secret or password are dropped, never parsed into a knob, and `redact_argv`
replaces them for display.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import yaml

from vtop import knobs, untrusted
from vtop.model import Knob

log = logging.getLogger(__name__)

_KNOBS: Final = knobs.read_at("cmdline")
"""The knobs read from a command line, by vLLM's `dest` name (`vtop.knobs`)."""

_SHORT: Final[Mapping[str, str]] = {s.short: name for name, s in _KNOBS.items() if s.short}
"""vLLM's short aliases: `-tp` for `--tensor-parallel-size`."""

_BOOLEAN_FLAGS: Final = frozenset(
    {
        "trust_remote_code",
        "enforce_eager",
        "headless",
        "async_scheduling",
        "skip_tokenizer_init",
        "use_v2_block_manager",
        "worker_use_ray",
        "return_tokens_as_token_ids",
        "allow_credentials",
    }
)
"""Unknown-to-vtop flags that take no value, so a following token is not theirs.

Flags named `enable_*`, `disable_*` and `no_*` are treated the same way.
"""

_SECRET = re.compile(r"(?:^|_)(?:key|token|secret|password|passwd|credentials?)$")
"""`api_key`, `hf_token`, ...; `max_num_batched_tokens` (plural) is not one."""

_SERVER_MODULES: Final = frozenset({"vllm.entrypoints.openai.api_server"})
_CLI_MODULES: Final = frozenset({"vllm.entrypoints.cli.main", "vllm.scripts"})

_PYTHON_OPTIONS_WITH_VALUE: Final = frozenset({"-X", "-W", "--check-hash-based-pycs"})

_BOOLEAN_WORDS: Final = frozenset(knobs.TRUE + knobs.FALSE)
_NUMBER = re.compile(r"^-\d")


@dataclass(frozen=True, slots=True)
class ServerArgv:
    """Where a vLLM API server's own arguments start in a process's argv."""

    args: tuple[str, ...]
    positional_model: bool
    """True for the `serve` sub-command, whose first positional argument is the model."""


def server_args(argv: Sequence[str]) -> ServerArgv | None:
    """The arguments after `vllm serve` / `-m vllm.entrypoints.openai.api_server`, or None.

    None means the process is not a vLLM API server (it may be one of vLLM's own children,
    whose title `VLLM::EngineCore` replaces the argv, or anything else).
    """
    i, n = 0, len(argv)
    while i < n:
        token, nxt = argv[i], argv[i + 1] if i + 1 < n else None
        if os.path.basename(token) == "vllm" and nxt == "serve":
            return ServerArgv(tuple(argv[i + 2 :]), positional_model=True)
        if token == "-m":
            if nxt in _SERVER_MODULES:
                return ServerArgv(tuple(argv[i + 2 :]), positional_model=False)
            if nxt in _CLI_MODULES and argv[i + 2 : i + 3] == ["serve"]:
                return ServerArgv(tuple(argv[i + 3 :]), positional_model=True)
            return None
        if i > 0 and not token.startswith("-"):
            return None  # past the interpreter's options: some other script or program
        i += 2 if token in _PYTHON_OPTIONS_WITH_VALUE else 1
    return None


def is_vllm_server_argv(argv: Sequence[str]) -> bool:
    """True for the argv of a vLLM OpenAI API server process (not its engine children)."""
    return server_args(argv) is not None


def _dest(flag: str) -> str:
    """`--max-num-seqs` / `--max_num_seqs` / `-tp` -> vLLM's dest name."""
    name = flag.lstrip("-").replace("-", "_")
    if not flag.startswith("--"):
        return _SHORT.get(name, name)
    return name


def _is_secret(dest: str) -> bool:
    return bool(_SECRET.search(dest))


def _is_option(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not _NUMBER.match(token)


def _is_bool(dest: str) -> bool:
    spec = _KNOBS.get(dest)
    return spec is not None and spec.kind is bool


def _takes_no_value(dest: str) -> bool:
    if _is_bool(dest) or dest in _BOOLEAN_FLAGS:
        return True
    return dest.startswith(("enable_", "disable_", "no_"))


@dataclass(frozen=True, slots=True)
class _Raw:
    value: str | bool | list[str]
    where: str


def _scan(args: Sequence[str], positional_model: bool) -> tuple[dict[str, _Raw], str | None]:
    """Walk the arguments once; raw values by dest (last wins) and the `--config` path."""
    found: dict[str, _Raw] = {}
    config: str | None = None
    i, n = 0, len(args)
    positionals: list[str] = []
    while i < n:
        token = args[i]
        i += 1
        if token == "--":
            positionals.extend(args[i:])
            break
        if not _is_option(token):
            positionals.append(token)
            continue
        flag, eq, inline = token.partition("=")
        dest = _dest(flag)
        values: list[str] = [inline] if eq else []
        if _takes_no_value(dest):
            if not eq and i < n and args[i].lower() in _BOOLEAN_WORDS:
                values = [args[i]]  # old vLLM: --enable-chunked-prefill False
                i += 1
        elif not eq:
            spec = _KNOBS.get(dest)
            many = (spec is not None and spec.many) or _is_secret(dest)  # nargs="+" (api keys too)
            while i < n and not _is_option(args[i]):
                values.append(args[i])
                i += 1
                if not many:
                    break
        if _is_secret(dest):
            continue
        if dest == "config":
            config = values[0] if values else config
            continue
        negated = dest.startswith("no_") and _is_bool(dest[3:])
        if negated:
            dest = dest[3:]
        known = _KNOBS.get(dest)
        if known is None:
            continue
        if known.kind is bool:
            value: str | bool | list[str] = values[0] if values else True
            if negated:
                value = False
        elif known.many:
            value = values
        elif values:
            value = values[0]
        else:
            continue  # a value flag with nothing after it: argparse would refuse it too
        found[dest] = _Raw(value, flag)
    if positional_model and positionals:
        found["model"] = _Raw(positionals[0], "serve MODEL")
    return found, config


def _read_config(path: str, cwd: str | None) -> dict[str, object]:
    """The `--config` YAML as {dest: value}; {} when unreadable (with one log line)."""
    file = Path(path)
    if cwd is not None and not file.is_absolute():
        file = Path(cwd) / file
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        log.info("vLLM --config %s not read: %s", file, exc)
        return {}
    if not isinstance(data, dict):
        log.info("vLLM --config %s is not a mapping; ignored", file)
        return {}
    return {_dest("--" + str(key)): value for key, value in data.items()}


def parse_vllm_argv(
    argv: Sequence[str], *, pid: int | None = None, cwd: str | None = None
) -> dict[str, Knob]:
    """The knobs a vLLM server was started with, by vLLM's name (`max_num_seqs`, ...).

    `argv` is a whole process argv (`vllm serve …`, `python -m vllm.entrypoints…`) or just
    the server's arguments. `pid` and `cwd` (the server's working directory, against which a
    relative `--config` path is read) only sharpen the provenance and the config lookup.
    Provenance is `process`; `detail` names the pid and the flag. Never raises on odd input.
    """
    located = server_args(argv)
    if located is not None:
        args, positional = located.args, located.positional_model
    elif argv and not argv[0].startswith("-"):
        args, positional = tuple(argv[1:]), False
    else:
        args, positional = tuple(argv), False
    found, config = _scan(args, positional)
    where = f"pid {pid} command line" if pid is not None else "command line"

    started: dict[str, Knob] = {}
    if config is not None:
        for dest, raw in _read_config(config, cwd).items():
            if dest not in _KNOBS or _is_secret(dest):
                continue
            value = knobs.read(dest, raw)
            if value is not None:
                prefix = f"pid {pid} " if pid is not None else ""
                shown = untrusted.clean(config, 200)
                detail = f"{prefix}--config {shown}: {dest.replace('_', '-')}"
                started[dest] = Knob(dest, value, "process", detail)
    for dest, raw in found.items():
        value = knobs.read(dest, raw.value)
        if value is None:
            kind = _KNOBS[dest].kind.__name__
            log.info("vLLM %s %r is not a valid %s; ignored", raw.where, raw.value, kind)
            continue
        detail = f"{where} {raw.where}"
        if isinstance(raw.value, list) and len(raw.value) > 1:
            detail += f" (first of {len(raw.value)} names)"
        started[dest] = Knob(dest, value, "process", detail)
    return started


REDACTED: Final = "<redacted>"


def redact_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """argv fit for display: the values of secret flags (`--api-key k`) replaced."""
    out: list[str] = []
    hiding = False
    for token in argv:
        if _is_option(token):
            flag, eq, _ = token.partition("=")
            hiding = _is_secret(_dest(flag))
            out.append(f"{flag}={REDACTED}" if hiding and eq else token)
            hiding = hiding and not eq
        elif hiding:
            out.append(REDACTED)
        else:
            out.append(token)
    return tuple(out)

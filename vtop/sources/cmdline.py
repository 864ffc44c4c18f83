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
from typing import Final, Literal

import yaml

from vtop import untrusted
from vtop.model import Knob, KnobValue

log = logging.getLogger(__name__)

_Kind = Literal["int", "float", "bool", "str", "strs"]

_KNOBS: Final[Mapping[str, _Kind]] = {
    "max_num_seqs": "int",
    "max_num_batched_tokens": "int",
    "max_model_len": "int",
    "tensor_parallel_size": "int",
    "pipeline_parallel_size": "int",
    "data_parallel_size": "int",
    "gpu_memory_utilization": "float",
    "quantization": "str",
    "kv_cache_dtype": "str",
    "block_size": "int",
    "enable_prefix_caching": "bool",
    "enable_chunked_prefill": "bool",
    "long_prefill_token_threshold": "int",
    "max_num_partial_prefills": "int",
    "model": "str",
    "served_model_name": "strs",
    "port": "int",
    "host": "str",
    "api_server_count": "int",
}
"""The knobs read from a command line, by vLLM's `dest` name, with their value type."""

_SHORT: Final[Mapping[str, str]] = {
    "tp": "tensor_parallel_size",
    "pp": "pipeline_parallel_size",
    "dp": "data_parallel_size",
    "q": "quantization",
    "asc": "api_server_count",
}

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

_TRUE: Final = frozenset({"true", "1", "yes", "on"})
_FALSE: Final = frozenset({"false", "0", "no", "off"})
_NUMBER = re.compile(r"^-\d")
_HUMAN_INT = re.compile(r"^(\d+(?:\.\d+)?)([kKmMgGtT]?)$")
_HUMAN_SCALE: Final = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}


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


def _takes_no_value(dest: str) -> bool:
    if _KNOBS.get(dest) == "bool" or dest in _BOOLEAN_FLAGS:
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
            if not eq and i < n and args[i].lower() in _TRUE | _FALSE:
                values = [args[i]]  # old vLLM: --enable-chunked-prefill False
                i += 1
        elif not eq:
            many = _KNOBS.get(dest) == "strs" or _is_secret(dest)  # nargs="+" (api keys too)
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
        negated = dest.startswith("no_") and _KNOBS.get(dest[3:]) == "bool"
        if negated:
            dest = dest[3:]
        kind = _KNOBS.get(dest)
        if kind is None:
            continue
        if kind == "bool":
            value: str | bool | list[str] = values[0] if values else True
            if negated:
                value = False
        elif kind == "strs":
            value = values
        elif values:
            value = values[0]
        else:
            continue  # a value flag with nothing after it: argparse would refuse it too
        found[dest] = _Raw(value, flag)
    if positional_model and positionals:
        found["model"] = _Raw(positionals[0], "serve MODEL")
    return found, config


def _typed(kind: _Kind, raw: object) -> KnobValue:
    """A raw value as the knob's type; None when it does not fit (the knob is then skipped)."""
    if isinstance(raw, list):
        names = [untrusted.clean(x, 200) for x in raw if str(x)]
        return names[0] if names else None
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        text = str(raw).lower()
        return True if text in _TRUE else False if text in _FALSE else None
    if isinstance(raw, bool):
        return None
    if kind == "int":
        if isinstance(raw, int):
            return raw
        return _human_int(str(raw))
    if kind == "float":
        try:
            return float(str(raw))
        except ValueError:
            return None
    # A process's command line is anyone's on this host to write: a text knob is shown inert.
    return None if raw is None else untrusted.clean(raw, 200)


def _human_int(text: str) -> int | None:
    """vLLM's human-readable ints: `2048`, `-1`, `32k` (×1000), `32K` (×1024), `1.5m`."""
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    match = _HUMAN_INT.match(text)
    if match is None:
        return None
    number, suffix = match.groups()
    if not suffix:
        return None  # "12.5": not an integer
    scale = _HUMAN_SCALE[suffix.lower()]
    if suffix.isupper():
        scale = 1024 ** (list(_HUMAN_SCALE).index(suffix.lower()) + 1)
    return int(float(number) * scale)


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

    knobs: dict[str, Knob] = {}
    if config is not None:
        for dest, raw in _read_config(config, cwd).items():
            kind = _KNOBS.get(dest)
            if kind is None or _is_secret(dest):
                continue
            value = _typed(kind, raw)
            if value is not None:
                prefix = f"pid {pid} " if pid is not None else ""
                shown = untrusted.clean(config, 200)
                detail = f"{prefix}--config {shown}: {dest.replace('_', '-')}"
                knobs[dest] = Knob(dest, value, "process", detail)
    for dest, raw in found.items():
        kind = _KNOBS[dest]
        value = _typed(kind, raw.value)
        if value is None:
            log.info("vLLM %s %r is not a valid %s; ignored", raw.where, raw.value, kind)
            continue
        detail = f"{where} {raw.where}"
        if isinstance(raw.value, list) and len(raw.value) > 1:
            detail += f" (first of {len(raw.value)} names)"
        knobs[dest] = Knob(dest, value, "process", detail)
    return knobs


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

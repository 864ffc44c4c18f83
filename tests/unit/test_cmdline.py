"""parse_vllm_argv and friends: the vLLM server's knobs from its command line."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from vtop.knobs import KnobValue
from vtop.model import Knob
from vtop.sources.cmdline import (
    REDACTED,
    is_vllm_server_argv,
    parse_vllm_argv,
    redact_argv,
    server_args,
)

SERVE = "vllm serve Qwen/Qwen2.5-7B-Instruct-AWQ"
API = "python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen2.5-7B-Instruct-AWQ"
M = {"model": "Qwen/Qwen2.5-7B-Instruct-AWQ"}


def values(command: str) -> dict[str, KnobValue]:
    return {k: v.value for k, v in parse_vllm_argv(shlex.split(command)).items()}


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # the two launchers, and the module form of the CLI
        (SERVE, M),
        (API, M),
        ("/usr/bin/python3 /opt/venv/bin/vllm serve m --port 8001", {"model": "m", "port": 8001}),
        (
            "python3 -m vllm.entrypoints.cli.main serve m -tp 2",
            {"model": "m", "tensor_parallel_size": 2},
        ),
        ("python -u -X utf8 -m vllm.entrypoints.openai.api_server --port=9000", {"port": 9000}),
        # --flag v, --flag=v, underscores, last one wins
        (f"{SERVE} --max-num-seqs 64", {**M, "max_num_seqs": 64}),
        (f"{SERVE} --max-num-seqs=64", {**M, "max_num_seqs": 64}),
        (f"{SERVE} --max_num_seqs 64", {**M, "max_num_seqs": 64}),
        (f"{SERVE} --max_num_seqs=64 --max-num-seqs 128", {**M, "max_num_seqs": 128}),
        # every knob, typed
        (
            f"{API} --max-num-batched-tokens 8192 --max-model-len 32768 --tensor-parallel-size 2"
            " --pipeline-parallel-size 1 --data-parallel-size 2 --gpu-memory-utilization 0.85"
            " --quantization awq --kv-cache-dtype fp8 --block-size 16 --enable-prefix-caching"
            " --enable-chunked-prefill --long-prefill-token-threshold 512"
            " --max-num-partial-prefills 2 --served-model-name qwen --port 8000 --host 0.0.0.0"
            " --api-server-count 2",
            {
                "model": "Qwen/Qwen2.5-7B-Instruct-AWQ",
                "max_num_batched_tokens": 8192,
                "max_model_len": 32768,
                "tensor_parallel_size": 2,
                "pipeline_parallel_size": 1,
                "data_parallel_size": 2,
                "gpu_memory_utilization": 0.85,
                "quantization": "awq",
                "kv_cache_dtype": "fp8",
                "block_size": 16,
                "enable_prefix_caching": True,
                "enable_chunked_prefill": True,
                "long_prefill_token_threshold": 512,
                "max_num_partial_prefills": 2,
                "served_model_name": "qwen",
                "port": 8000,
                "host": "0.0.0.0",
                "api_server_count": 2,
            },
        ),
        # short aliases
        (
            f"{SERVE} -tp 4 -pp=2 -dp 2 -q gptq -asc 3",
            {
                **M,
                "tensor_parallel_size": 4,
                "pipeline_parallel_size": 2,
                "data_parallel_size": 2,
                "quantization": "gptq",
                "api_server_count": 3,
            },
        ),
        # booleans: negation, old releases' explicit value, =value
        (f"{SERVE} --no-enable-prefix-caching", {**M, "enable_prefix_caching": False}),
        (
            f"{SERVE} --enable-prefix-caching --no-enable-prefix-caching",
            {**M, "enable_prefix_caching": False},
        ),
        (f"{SERVE} --enable-chunked-prefill False", {**M, "enable_chunked_prefill": False}),
        (f"{SERVE} --enable-chunked-prefill=true", {**M, "enable_chunked_prefill": True}),
        (f"{SERVE} --no_enable_chunked_prefill", {**M, "enable_chunked_prefill": False}),
        # human-readable integers, as vLLM takes them
        (f"{SERVE} --max-model-len 32k", {**M, "max_model_len": 32000}),
        (f"{SERVE} --max-model-len 32K", {**M, "max_model_len": 32768}),
        (f"{SERVE} --max-num-batched-tokens 1.5k", {**M, "max_num_batched_tokens": 1500}),
        (f"{SERVE} --max-model-len -1", {**M, "max_model_len": -1}),
        # values that do not fit the type are skipped, not guessed
        (f"{SERVE} --max-num-seqs lots --gpu-memory-utilization high", {**M}),
        (f"{SERVE} --max-num-seqs", {**M}),
        # unknown flags (with and without values) are skipped without eating our knobs
        (
            f"{SERVE} --trust-remote-code --enforce-eager --seed 0 --dtype half"
            " --disable-log-requests --max-num-seqs 32 --uvicorn-log-level=warning"
            " --lora-modules a=b c=d --max-model-len 4096",
            {**M, "max_num_seqs": 32, "max_model_len": 4096},
        ),
        # served-model-name takes several names; the first is the one metrics carry
        (
            f"{SERVE} --served-model-name qwen qwen-7b --port 8002",
            {**M, "served_model_name": "qwen", "port": 8002},
        ),
        # the serve positional may come after options; it wins over --model
        ("vllm serve --port 8003 my/model", {"model": "my/model", "port": 8003}),
        ("vllm serve pos/model --model flag/model", {"model": "pos/model"}),
        # just the arguments, without a launcher
        ("--max-num-seqs 16 --model m", {"max_num_seqs": 16, "model": "m"}),
    ],
)
def test_parse_variants(command: str, expected: dict[str, KnobValue]) -> None:
    assert values(command) == expected


def test_value_types_are_exact() -> None:
    knobs = parse_vllm_argv(shlex.split(f"{SERVE} --gpu-memory-utilization 1 --max-num-seqs 8"))
    assert type(knobs["gpu_memory_utilization"].value) is float
    assert type(knobs["max_num_seqs"].value) is int


def test_provenance_and_detail_name_the_pid_and_the_flag() -> None:
    knobs = parse_vllm_argv(shlex.split(f"{SERVE} -tp 2 --max_num_seqs=64"), pid=4242)
    assert knobs["max_num_seqs"] == Knob(
        "max_num_seqs", 64, "process", "pid 4242 command line --max_num_seqs"
    )
    assert knobs["tensor_parallel_size"].detail == "pid 4242 command line -tp"
    assert knobs["model"].detail == "pid 4242 command line serve MODEL"
    assert all(not k.assumed for k in knobs.values())
    assert parse_vllm_argv(["--max-num-seqs", "8"])["max_num_seqs"].detail == (
        "command line --max-num-seqs"
    )


SECRET = "sk-very-secret-0123456789"


@pytest.mark.parametrize(
    "command",
    [
        f"{SERVE} --api-key {SECRET} --max-num-seqs 64",
        f"{SERVE} --api-key={SECRET} --max-num-seqs 64",
        f"{SERVE} --api_key {SECRET} {SECRET}2 --max-num-seqs 64",
        f"{SERVE} --hf-token {SECRET} --max-num-seqs 64",
    ],
)
def test_secrets_never_reach_a_knob_or_the_display_argv(command: str) -> None:
    argv = shlex.split(command)
    knobs = parse_vllm_argv(argv, pid=1)
    assert knobs["max_num_seqs"].value == 64
    assert knobs["model"].value == "Qwen/Qwen2.5-7B-Instruct-AWQ"
    assert SECRET not in repr(knobs)
    shown = redact_argv(argv)
    assert SECRET not in " ".join(shown)
    assert any(REDACTED in token for token in shown)
    assert "64" in shown  # the rest is kept
    assert len(shown) == len(argv)


def test_plural_tokens_flags_are_not_mistaken_for_secrets() -> None:
    argv = shlex.split(f"{SERVE} --max-num-batched-tokens 4096 --long-prefill-token-threshold 64")
    assert redact_argv(argv) == tuple(argv)
    assert values(" ".join(argv))["max_num_batched_tokens"] == 4096


def test_config_file_is_read_and_the_command_line_wins(tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text(
        "max-num-seqs: 128\n"
        "max_num_batched_tokens: 8k\n"
        "enable-prefix-caching: false\n"
        "gpu-memory-utilization: 0.9\n"
        "port: 8000\n"
        f"api-key: {SECRET}\n"
        "some-future-flag: [1, 2]\n",
        encoding="utf-8",
    )
    argv = ["vllm", "serve", "m", "--config", "serve.yaml", "--port", "8010"]
    knobs = parse_vllm_argv(argv, pid=7, cwd=str(tmp_path))
    assert {k: v.value for k, v in knobs.items()} == {
        "model": "m",
        "max_num_seqs": 128,
        "max_num_batched_tokens": 8000,
        "enable_prefix_caching": False,
        "gpu_memory_utilization": 0.9,
        "port": 8010,
    }
    assert knobs["max_num_seqs"].detail == "pid 7 --config serve.yaml: max-num-seqs"
    assert knobs["port"].detail == "pid 7 command line --port"
    assert SECRET not in repr(knobs)


@pytest.mark.parametrize("content", ["[unclosed", "- a list\n", "\xff\xfe"])
def test_an_unreadable_config_is_ignored(tmp_path: Path, content: str) -> None:
    config = tmp_path / "bad.yaml"
    config.write_bytes(content.encode("latin-1"))
    argv = ["vllm", "serve", "m", f"--config={config}", "--max-num-seqs", "4"]
    assert values(shlex.join(argv)) == {"model": "m", "max_num_seqs": 4}
    missing = ["vllm", "serve", "m", "--config", str(tmp_path / "nope.yaml")]
    assert values(shlex.join(missing)) == {"model": "m"}


@pytest.mark.parametrize(
    ("argv", "is_server"),
    [
        (["vllm", "serve", "m"], True),
        (["/opt/venv/bin/python3", "/opt/venv/bin/vllm", "serve", "m"], True),
        (["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], True),
        (["python3", "-m", "vllm.entrypoints.cli.main", "serve", "m"], True),
        (["python3", "-m", "vllm.entrypoints.cli.main", "bench", "serve"], False),
        (["vllm", "bench", "serve", "--port", "8000"], False),
        (["vllm", "chat"], False),
        (["VLLM::EngineCore"], False),
        (["VLLM::Worker_TP0"], False),
        (["python3", "-c", "from multiprocessing.spawn import spawn_main; spawn_main()"], False),
        (["python3", "my_script.py", "vllm", "serve"], False),
        (["tail", "-f", "vllm serve.log"], False),
        (["grep", "vllm.entrypoints.openai.api_server"], False),
        ([], False),
    ],
)
def test_is_vllm_server_argv(argv: list[str], is_server: bool) -> None:
    assert is_vllm_server_argv(argv) is is_server


def test_server_args_says_where_the_server_arguments_start() -> None:
    located = server_args(
        ["python", "-m", "vllm.entrypoints.cli.main", "serve", "m", "--port", "1"]
    )
    assert located is not None
    assert located.args == ("m", "--port", "1")
    assert located.positional_model


@pytest.mark.parametrize(
    "argv",
    [
        ["vllm", "serve", "--", "--", "-", "="],
        ["vllm", "serve", "=", "--=", "--=x", "-", "---"],
        ["vllm", "serve", "m", "--port", "--max-num-seqs", "--host"],
        ["vllm"],
        [""],
    ],
)
def test_odd_input_never_raises(argv: list[str]) -> None:
    parse_vllm_argv(argv)
    redact_argv(argv)

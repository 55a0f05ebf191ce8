"""Tiny random models of each architecture the engine runs, made with transformers' own
config classes and saved as Hugging Face folders (config, safetensors, a byte-level
tokenizer), so the engine's numbers can be held to transformers' on the same weights.

The weights are drawn wider than transformers' initialisation (std 0.02 gives near-flat
logits, whose greedy ties would turn on rounding) and every norm gets a random weight,
so a norm loaded in the wrong place or without Gemma's 1 + w shows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

BYTES = 256
SPECIALS = ("<bos>", "<eos>", "<pad>")
VOCAB = 272  # the byte tokens, the specials, a few ids no text makes
BOS, EOS = BYTES, BYTES + 1

COMMON: dict[str, Any] = {
    "vocab_size": VOCAB,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "rms_norm_eps": 1e-6,
    "bos_token_id": BOS,
    "eos_token_id": EOS,
    "pad_token_id": BYTES + 2,
}


def config(kind: str, **settings: Any) -> Any:
    """A transformers config of model type `kind` over the tiny shape, `settings` on top."""
    import transformers

    classes = {
        "llama": transformers.LlamaConfig,
        "mistral": transformers.MistralConfig,
        "qwen2": transformers.Qwen2Config,
        "qwen3": transformers.Qwen3Config,
        "gemma3_text": transformers.Gemma3TextConfig,
        "smollm3": transformers.SmolLM3Config,
    }
    extra: dict[str, Any] = {}
    if kind in ("qwen3", "gemma3_text"):
        extra["head_dim"] = 32  # its own head width, not hidden / heads
    return classes[kind](**{**COMMON, **extra, **settings})


def randomise(model: torch.nn.Module, seed: int) -> None:
    """Every weight drawn anew: products with std 0.15, norms near their identity
    (Gemma's, stored as w for 1 + w, near 0)."""
    generator = torch.Generator().manual_seed(seed)
    gemma = "Gemma" in type(model).__name__
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator)
            if name.endswith("norm.weight"):
                p.copy_(0.2 * noise + (0.0 if gemma else 1.0))
            else:
                p.copy_(0.15 * noise)


def save(root: Path, cfg: Any, seed: int = 0) -> Any:
    """A random transformers model of `cfg` saved under `root` with a byte-level tokenizer;
    returns the model (float32, eval)."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
    randomise(model, seed)
    model.save_pretrained(root)
    save_tokenizer(root)
    return model


def save_tokenizer(root: Path) -> None:
    """Byte-level BPE without merges: one token per UTF-8 byte, then the specials."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel

    alphabet = ByteLevel.alphabet()
    byte_chars = sorted(alphabet, key=lambda c: bytes_of(c))
    vocab = {c: i for i, c in enumerate(byte_chars)}
    vocab |= {s: BYTES + i for i, s in enumerate(SPECIALS)}
    tok = Tokenizer(models.BPE(vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(list(SPECIALS))
    tok.save(str(root / "tokenizer.json"))
    settings = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": SPECIALS[0],
        "eos_token": SPECIALS[1],
        "pad_token": SPECIALS[2],
    }
    (root / "tokenizer_config.json").write_text(json.dumps(settings), encoding="utf-8")


def bytes_of(char: str) -> int:
    """The byte that GPT-2's byte-level alphabet writes as `char`."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]  # fmt: skip
    if ord(char) in printable:
        return ord(char)
    others = [b for b in range(BYTES) if b not in printable]
    return others[ord(char) - BYTES]


def encode(text: str) -> list[int]:
    """The tokenizer's ids of `text`: its UTF-8 bytes."""
    return list(text.encode("utf-8"))

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


GGUF_ARCHS = {"llama": "llama", "mistral": "llama", "qwen3": "qwen3", "gemma3_text": "gemma3",
              "smollm3": "smollm3"}  # fmt: skip
MERGED = "Āā"  # the tokenizer's one merge (bytes 0 and 1), at id BYTES + len(SPECIALS)


def write_gguf(path: Path, model: Any) -> dict[str, torch.Tensor]:
    """`model` (llama, mistral, qwen3, gemma3_text or smollm3) written as llama.cpp's
    converter writes it: its tensor names, Llama's (and Mistral's and SmolLM3's) q and k
    rows permuted, Gemma's norms as 1 + w, a linear rope scaling in the metadata, Llama
    3's as a rope_freqs tensor, Mistral's sliding window; the projections and the
    embedding in Q8_0, the MLP's down projection in float16, norms in float32; and the
    byte-level tokenizer (with one merge no text here makes: gguf-py writes no empty
    list). Returns the model's state dict holding the numbers the file stands for (the
    quantised ones as gguf-py dequantises them), for the reference."""
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFWriter, RopeScalingType, TokenType
    from gguf.quants import dequantize, quantize
    from tokenizers.pre_tokenizers import ByteLevel

    cfg = model.config
    gemma = cfg.model_type == "gemma3_text"
    permuted = cfg.model_type in ("llama", "mistral", "smollm3")
    writer = GGUFWriter(str(path), GGUF_ARCHS[cfg.model_type])
    tokens = [*sorted(ByteLevel.alphabet(), key=bytes_of), *SPECIALS, MERGED]
    tokens += [f"<unused{i}>" for i in range(VOCAB - len(tokens))]
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([TokenType.CONTROL if t in SPECIALS else TokenType.NORMAL
                            for t in tokens])  # fmt: skip
    writer.add_token_merges([" ".join(MERGED)])
    writer.add_bos_token_id(BOS)
    writer.add_eos_token_id(EOS)
    writer.add_pad_token_id(BYTES + 2)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    rope = cfg.rope_parameters["full_attention"] if gemma else cfg.rope_parameters
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_rope_freq_base(rope["rope_theta"])
    writer.add_vocab_size(cfg.vocab_size)
    if permuted:
        writer.add_rope_dimension_count(head_dim)
    if gemma or (cfg.model_type == "mistral" and cfg.sliding_window):
        writer.add_sliding_window(cfg.sliding_window)
    if rope.get("rope_type") == "linear":
        writer.add_rope_scaling_type(RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(rope["factor"])
    elif rope.get("rope_type") == "yarn":
        writer.add_rope_scaling_type(RopeScalingType.YARN)
        writer.add_rope_scaling_factor(rope["factor"])
        writer.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}

    def permute(w: np.ndarray, heads: int, back: bool = False) -> np.ndarray:
        shape = (heads, 2, w.shape[0] // heads // 2) if not back else (heads, -1, 2)
        return w.reshape(*shape, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

    def put(theirs: str, ours: str, kind: str, heads: int = 0) -> None:
        w = state[ours].float().numpy()
        if gemma and ours.endswith("norm.weight"):
            w = w + 1
        if heads:
            w = permute(w, heads)
        if kind == "q8":
            raw = quantize(w, GGMLQuantizationType.Q8_0)
            writer.add_tensor(theirs, raw, raw_dtype=GGMLQuantizationType.Q8_0)
            back = dequantize(raw, GGMLQuantizationType.Q8_0).reshape(w.shape)
        elif kind == "f16":
            writer.add_tensor(theirs, w.astype(np.float16))
            back = w.astype(np.float16).astype(np.float32)
        else:
            writer.add_tensor(theirs, w.astype(np.float32))
            back = w.astype(np.float32)
        if heads:
            back = permute(back, heads, back=True)
        if gemma and ours.endswith("norm.weight"):
            back = back - 1
        state[ours] = torch.from_numpy(np.ascontiguousarray(back))

    heads, kv = cfg.num_attention_heads, cfg.num_key_value_heads
    names = [("attn_q", "self_attn.q_proj", "q8", heads if permuted else 0),
             ("attn_k", "self_attn.k_proj", "q8", kv if permuted else 0),
             ("attn_v", "self_attn.v_proj", "q8", 0),
             ("attn_output", "self_attn.o_proj", "q8", 0),
             ("ffn_gate", "mlp.gate_proj", "q8", 0),
             ("ffn_up", "mlp.up_proj", "q8", 0),
             ("ffn_down", "mlp.down_proj", "f16", 0),
             ("attn_norm", "input_layernorm", "f32", 0)]  # fmt: skip
    if gemma:
        names += [("post_attention_norm", "post_attention_layernorm", "f32", 0),
                  ("ffn_norm", "pre_feedforward_layernorm", "f32", 0),
                  ("post_ffw_norm", "post_feedforward_layernorm", "f32", 0)]  # fmt: skip
    else:
        names.append(("ffn_norm", "post_attention_layernorm", "f32", 0))
    if "model.layers.0.self_attn.q_norm.weight" in state:
        names += [("attn_q_norm", "self_attn.q_norm", "f32", 0),
                  ("attn_k_norm", "self_attn.k_norm", "f32", 0)]  # fmt: skip
    for i in range(cfg.num_hidden_layers):
        for theirs, ours, kind, h in names:
            put(f"blk.{i}.{theirs}.weight", f"model.layers.{i}.{ours}.weight", kind, h)
            if f"model.layers.{i}.{ours}.bias" in state:
                put(f"blk.{i}.{theirs}.bias", f"model.layers.{i}.{ours}.bias", "f32", h)
    put("output_norm.weight", "model.norm.weight", "f32")
    put("token_embd.weight", "model.embed_tokens.weight", "q8")
    if cfg.tie_word_embeddings:
        state["lm_head.weight"] = state["model.embed_tokens.weight"]
    else:
        put("output.weight", "lm_head.weight", "q8")
    if rope.get("rope_type") == "llama3":
        writer.add_tensor("rope_freqs.weight", llama3_factors(rope, head_dim))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return state


def llama3_factors(rope: dict[str, Any], dim: int) -> Any:
    """llama.cpp's rope_freqs for Llama 3's scaling (convert_hf_to_gguf.py's LlamaModel)."""
    import math

    import numpy as np

    base, factor = rope["rope_theta"], rope["factor"]
    low, high = rope["low_freq_factor"], rope["high_freq_factor"]
    old = rope["original_max_position_embeddings"]
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factors = []
    for freq in freqs.tolist():
        wavelen = 2 * math.pi / freq
        if wavelen < old / high:
            factors.append(1.0)
        elif wavelen > old / low:
            factors.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(factors, dtype=np.float32)

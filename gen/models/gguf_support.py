"""Whether gen runs a GGUF file, decided from its header alone, before any tokenizer
conversion or weight: what the file asks for that gen does not do is named, and the file is
refused rather than run approximately.

Checked (`problems`):
- `general.architecture` is one of ARCHITECTURES; `general.type` is not `adapter` (a LoRA
  adapter is not a model); `split.count` is at most 1 (gen reads one file);
- `tokenizer.ggml.model` is one transformers converts: `llama` (SentencePiece) or `gpt2`
  (byte-level BPE);
- every tensor's type is one gguf-py dequantises: the kernels read some in place
  (gen.engine.quantised.runs, all of them dequantisable too) and the rest become float32;
- every tensor is one the engine reads for the architecture, and each layer has all of its
  own (a tensor the engine would pass over changes the arithmetic);
- every `<arch>.` metadata key is one gen knows (COMMON_KEYS and the architecture's own),
  and of those:
  - rope scaling: none, or a factor of 1, unless the architecture's `rope_scaling` lists the
    type (llama.cpp takes `linear` when a factor comes without a type);
  - `attention.causal` true; `expert_count` and `expert_used_count` 0 (no mixture of experts);
  - `attention.sliding_window` at least the context length, unless the architecture has
    sliding windows;
  - `attention.value_length` and `rope.dimension_count` equal to the head width
    (`attention.key_length`, else embedding_length / head_count: no partial rotary
    embedding), and so is the width the config will carry.
Other metadata (`general.*`, `tokenizer.*`, `quantize.*`) does not change the arithmetic.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from gen.errors import ModelError
from gen.models.gguf_header import GGUFHeader, read_header

LLAMA_LAYER = tuple(
    f"{name}.weight"
    for name in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm",
                 "ffn_gate", "ffn_up", "ffn_down")
)  # fmt: skip
GLOBAL_TENSORS = ("token_embd.weight", "output_norm.weight")
OPTIONAL_GLOBALS = ("output.weight",)  # absent: the embedding is tied to the output
TOKENIZERS = ("llama", "gpt2")

# the `<arch>.` keys every architecture's config is read from (transformers' GGUF mapping)
# or that change nothing when their values pass the checks below
COMMON_KEYS = frozenset({
    "context_length", "embedding_length", "block_count", "feed_forward_length", "vocab_size",
    "attention.head_count", "attention.head_count_kv", "attention.layer_norm_rms_epsilon",
    "attention.key_length", "attention.value_length", "attention.causal",
    "attention.sliding_window", "rope.dimension_count", "rope.freq_base", "rope.scale_linear",
    "rope.scaling.type", "rope.scaling.factor", "rope.scaling.original_context_length",
    "rope.scaling.finetuned", "expert_count", "expert_used_count",
})  # fmt: skip


@dataclass(frozen=True, slots=True)
class Architecture:
    """What the engine reads of one GGUF architecture.

    layer: the tensors of each layer `blk.N.`, all required.
    keys: `<arch>.` metadata beyond COMMON_KEYS that the engine honours.
    rope_scaling: rope scaling types the engine applies ("none" always passes).
    sliding_window: the engine honours `attention.sliding_window`.
    head_width: the key the config's head width is read from (None: it is
    embedding_length / head_count).
    optional: tensors outside the layers that the engine reads where the file has them."""

    layer: tuple[str, ...]
    keys: frozenset[str] = frozenset()
    rope_scaling: tuple[str, ...] = ("linear", "yarn")
    sliding_window: bool = False
    head_width: str | None = "attention.key_length"
    optional: tuple[str, ...] = ()


QK_NORMS = ("attn_q_norm.weight", "attn_k_norm.weight")
# Gemma 3's layer: the sandwich norms around attention and MLP (ffn_norm is the MLP's input)
GEMMA3_LAYER = (
    *LLAMA_LAYER, *QK_NORMS, "post_attention_norm.weight", "post_ffw_norm.weight",
)  # fmt: skip

# The one list of what gen runs; an architecture added to the engine is added here.
# (gen.models.gguf_weights.gguf_config applies a linear or YaRN rope scaling (file_rope),
# a `rope_freqs` tensor, llama.cpp's form of Llama 3's, and a Llama or Mistral file's
# sliding window, and takes the head width from key_length; SmolLM3's config is gen's own,
# as transformers does not read its files: gen.models.convert.own_config.)
ARCHITECTURES: dict[str, Architecture] = {
    "llama": Architecture(LLAMA_LAYER, sliding_window=True, optional=("rope_freqs.weight",)),
    "mistral": Architecture(LLAMA_LAYER, sliding_window=True),
    "qwen2": Architecture((*LLAMA_LAYER, "attn_q.bias", "attn_k.bias", "attn_v.bias")),
    "qwen3": Architecture((*LLAMA_LAYER, *QK_NORMS)),
    "gemma3": Architecture(GEMMA3_LAYER, sliding_window=True),
    "smollm3": Architecture(LLAMA_LAYER, optional=("rope_freqs.weight",)),
}


def check(path: Path) -> GGUFHeader:
    """The file's header, or ModelError naming everything it asks for that gen does not do."""
    header = read_header(path)
    found = problems(header)
    if found:
        raise ModelError(f"{path}: gen cannot run this file: {'; '.join(found)}")
    return header


def problems(header: GGUFHeader) -> list[str]:
    """What in the header gen does not run, one sentence each; empty when it runs."""
    meta = header.metadata
    name = str(meta.get("general.architecture", ""))
    arch = ARCHITECTURES.get(name)
    found: list[str] = []
    if arch is None:
        found.append(
            f"the architecture {name or '(none given)'!r} is not one gen runs "
            f"({', '.join(ARCHITECTURES)})"
        )
    if meta.get("general.type") == "adapter":
        found.append("it is a LoRA adapter, not a model")
    splits = meta.get("split.count")
    if isinstance(splits, int) and splits > 1:
        found.append(f"it is one of {splits} split files (gen reads a model in one file)")
    tokenizer = meta.get("tokenizer.ggml.model")
    if tokenizer not in TOKENIZERS:
        found.append(
            f"its tokenizer {tokenizer!r} is not one gen converts ({', '.join(TOKENIZERS)})"
        )
    found += _type_problems(header)
    if arch is not None:
        found += _tensor_problems(header, name, arch)
        found += _metadata_problems(meta, name, arch)
    return found


@functools.lru_cache(maxsize=64)
def dequantisable(kind: int) -> bool:
    """Can gguf-py turn tensors of ggml type `kind` into float32? (Tried on one block.)"""
    import numpy as np
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    from gguf.quants import dequantize

    try:
        qtype = GGMLQuantizationType(kind)
        _, size = GGML_QUANT_SIZES[qtype]
        dequantize(np.zeros(size, dtype=np.uint8), qtype)
    except (KeyError, ValueError, NotImplementedError):
        return False
    return True


def type_name(kind: int) -> str:
    from gguf.constants import GGMLQuantizationType

    try:
        return GGMLQuantizationType(kind).name
    except ValueError:
        return f"type {kind}"


def _type_problems(header: GGUFHeader) -> list[str]:
    refused = Counter(t.kind for t in header.tensors if not dequantisable(t.kind))
    if not refused:
        return []
    listed = ", ".join(
        f"{type_name(kind)} ({n} tensor{'s' * (n != 1)})" for kind, n in sorted(refused.items())
    )
    return [f"tensor types gen cannot read: {listed}"]


def _tensor_problems(header: GGUFHeader, name: str, arch: Architecture) -> list[str]:
    layers = header.metadata.get(f"{name}.block_count")
    count = layers if isinstance(layers, int) and layers >= 0 else 0
    expected = set(GLOBAL_TENSORS)
    expected |= {f"blk.{i}.{t}" for i in range(count) for t in arch.layer}
    present = {t.name for t in header.tensors}
    found = []
    unknown = sorted(present - expected - {*OPTIONAL_GLOBALS, *arch.optional}, key=_by_layer)
    if unknown:
        found.append(f"tensors gen does not read: {_names(unknown)}")
    missing = sorted(expected - present, key=_by_layer)
    if missing:
        found.append(f"tensors missing: {_names(missing)}")
    return found


def _by_layer(name: str) -> tuple[int, str]:
    parts = name.split(".")
    if parts[0] == "blk" and len(parts) > 2 and parts[1].isdigit():
        return int(parts[1]), ".".join(parts[2:])
    return -1, name


def _names(names: list[str], shown: int = 4) -> str:
    """A few of `names`, and how many in all."""
    listed = ", ".join(names[:shown])
    return f"{listed} and {len(names) - shown} more" if len(names) > shown else listed


def _metadata_problems(meta: dict[str, object], name: str, arch: Architecture) -> list[str]:
    prefix = f"{name}."
    own = {k.removeprefix(prefix): v for k, v in meta.items() if k.startswith(prefix)}
    found = []
    unknown = sorted(k for k in own if k not in COMMON_KEYS | arch.keys)
    if unknown:
        found.append(f"metadata gen does not know: {', '.join(prefix + k for k in unknown)}")
    # rope scaling: llama.cpp reads a factor without a type as linear
    factor = own.get("rope.scaling.factor", own.get("rope.scale_linear"))
    scaling = str(own.get("rope.scaling.type", "linear"))
    scaled = isinstance(factor, int | float) and factor not in (0, 1)
    if scaling != "none" and scaled and scaling not in arch.rope_scaling:
        found.append(f"rope scaling {scaling!r} (factor {factor}) is not one gen applies")
    if own.get("attention.causal", True) is not True:
        found.append("its attention is not causal")
    for key in ("expert_count", "expert_used_count"):
        if own.get(key, 0) not in (0, None):
            found.append(f"{prefix}{key} is {own[key]}: gen runs no mixture of experts")
    window, context = own.get("attention.sliding_window"), own.get("context_length")
    if (
        not arch.sliding_window
        and isinstance(window, int)
        and window > 0
        and not (isinstance(context, int) and window >= context)
    ):
        found.append(f"sliding-window attention ({window} tokens) is not one gen runs for {name}")
    found += _head_width_problems(own, prefix, arch)
    return found


def _head_width_problems(own: dict[str, object], prefix: str, arch: Architecture) -> list[str]:
    """The head width is key_length, else embedding_length / head_count; value_length and
    rope.dimension_count must match it, and so must the width the config will carry."""
    embedding, heads = own.get("embedding_length"), own.get("attention.head_count")
    even = (
        embedding // heads
        if isinstance(embedding, int) and isinstance(heads, int) and heads
        else None
    )
    width = own.get("attention.key_length", even)
    if not isinstance(width, int):
        return []  # nothing to compare with: the config's own check names what is missing
    found = [
        f"{prefix}{key} is {own[key]}, not the head width {width}"
        for key in ("attention.value_length", "rope.dimension_count")
        if key in own and own[key] != width
    ]
    carried = own.get(arch.head_width, even) if arch.head_width else even
    if not found and carried != width:
        found.append(f"the head width is {width}, and {prefix[:-1]}'s config would carry {carried}")
    return found

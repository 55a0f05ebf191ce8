"""Tiny GGUF files written with gguf-py's writer: a Llama-shaped model gen's header check
takes, and the same with one thing changed for the refusals."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter
from gguf.quants import quantize

from gen.models.gguf_support import LLAMA_LAYER

WIDTH, FFN, HEADS, VOCAB, CONTEXT = 32, 64, 2, 16, 64


def _shape(name: str) -> tuple[int, ...]:
    """(out, in) in numpy order, as the writer takes it."""
    if name.endswith("norm.weight") or name.endswith(".bias"):
        return (WIDTH,)
    if "ffn_gate" in name or "ffn_up" in name:
        return (FFN, WIDTH)
    if "ffn_down" in name:
        return (WIDTH, FFN)
    if name.startswith("token_embd") or name.startswith("output."):
        return (VOCAB, WIDTH)
    return (WIDTH, WIDTH)


def write_gguf(
    path: Path,
    arch: str = "llama",
    layers: int = 1,
    metadata: Mapping[str, object] | None = None,
    extra: Iterable[str] = (),
    missing: Iterable[str] = (),
    types: Mapping[str, GGMLQuantizationType | type] | None = None,
    layer_tensors: Iterable[str] = LLAMA_LAYER,
) -> Path:
    """A tiny model: `layers` layers of `layer_tensors` (float32 unless `types` gives a tensor
    a ggml block type or a numpy dtype), the embedding, the final norm, a gpt2 tokenizer's
    name; `metadata` adds or replaces keys (`{arch}` in a key is the architecture), `extra`
    adds tensors, `missing` leaves tensors out."""
    writer = GGUFWriter(str(path), arch)
    values: dict[str, object] = {
        "{arch}.context_length": CONTEXT,
        "{arch}.embedding_length": WIDTH,
        "{arch}.block_count": layers,
        "{arch}.feed_forward_length": FFN,
        "{arch}.attention.head_count": HEADS,
        "{arch}.attention.head_count_kv": HEADS,
        "{arch}.attention.layer_norm_rms_epsilon": 1e-5,
        "{arch}.rope.freq_base": 10000.0,
        "tokenizer.ggml.model": "gpt2",
    }
    values.update(metadata or {})
    for key, value in values.items():
        key = key.replace("{arch}", arch)
        if isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, int):
            writer.add_uint32(key, value)
        elif isinstance(value, float):
            writer.add_float32(key, value)
        elif isinstance(value, str):
            writer.add_string(key, value)
        else:
            raise TypeError(f"{key}: {value!r}")
    names = [f"blk.{i}.{t}" for i in range(layers) for t in layer_tensors]
    names += ["token_embd.weight", "output_norm.weight", *extra]
    rng, left_out = np.random.default_rng(0), set(missing)
    for name in names:
        if name in left_out:
            continue
        kind = (types or {}).get(name, np.float32)
        data = rng.standard_normal(_shape(name)).astype(np.float32)
        if isinstance(kind, GGMLQuantizationType):
            writer.add_tensor(name, quantize(data, kind), raw_dtype=kind)
        else:
            writer.add_tensor(name, data.astype(kind))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path

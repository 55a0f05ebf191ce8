"""A GGUF file's weights straight into the engine's LlamaModel (`dtype gguf`).

The file is memory-mapped (over the tensor table gen.models.gguf_header reads; gguf-py's
own reader parses the whole vocabulary first, seconds) and each projection keeps its
blocks: a QuantLinear where the kernels read its type (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
Q5_K, Q6_K, F16, BF16), packed from the map, otherwise dequantised once to float32 (the
other types). Nothing is converted to a float32 checkpoint first, and no second copy of the
model is made: a tensor used as stored is a view of the map, and the pages read are handed
back as the load moves on, so what stays resident is what the model holds (GGUFWeights).
Rows come out in Hugging Face's order: llama.cpp's converter permutes the rows of Llama's q
and k projections for its rotary layout, and this undoes it, as transformers' GGUF loader
does. Gemma's norm weights are stored as 1 + w, which is what the engine's norms take
(transformers subtracts the 1 again).

What transformers' reading of the metadata leaves out is read here (gguf_config): the
head width, and Llama 3's rope scaling in llama.cpp's form, a rope_freqs tensor.
"""

from __future__ import annotations

import mmap
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType

import numpy as np
import torch
from gguf import GGMLQuantizationType
from torch import nn

from gen.engine import LlamaModel, ModelConfig
from gen.engine import packed as packed_linears
from gen.engine.config import SLIDING, Rope
from gen.engine.llama import DecoderLayer
from gen.engine.quantised import NAMES, QuantEmbedding, QuantLinear, QuantStack, runs
from gen.errors import ModelError
from gen.models.gguf_header import TensorInfo, read_header

PERMUTED_ARCHS = ("llama", "mistral", "smollm3")  # llama.cpp's LlamaModel converter permutes
WINDOWED = ("llama", "mistral")  # a sliding window on every layer, as Mistral's
GEMMA3_27B_LAYERS = 62  # llama.cpp scales Gemma 3 27B's queries by hidden / heads
PLAIN = {GGMLQuantizationType.F32: np.float32, GGMLQuantizationType.F16: np.float16}


@dataclass(frozen=True, slots=True)
class Tensor:
    """A tensor of the file: data is a read-only view of the map, (rows, row bytes) uint8
    for a quantised type, (rows, columns) of its numbers otherwise."""

    name: str
    shape: tuple[int, ...]  # GGUF order: inputs first
    tensor_type: GGMLQuantizationType
    data: np.ndarray

    @property
    def n_elements(self) -> int:
        return int(np.prod(self.shape))


class GGUFWeights:
    """The tensors of one GGUF file, by name, mapped copy-on-write: views the engine can
    hold without a copy (nothing writes them). The pages a read touches are handed back
    (release) when the next read starts, by when its blocks are packed or copied, and at
    the end of the load: the map's pages count toward resident memory only while in use,
    and a view the model keeps (an embedding's rows, blocks the kernels read as stored)
    comes back from the page cache as it is read."""

    def __init__(self, path: Path) -> None:
        header = read_header(path)
        try:
            with path.open("rb") as f:
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        except (OSError, ValueError) as exc:
            raise ModelError(f"{path}: cannot map: {exc}") from exc
        raw = np.frombuffer(self._map, dtype=np.uint8)
        self.path = path
        self.metadata = header.metadata
        self.arch = str(header.metadata.get("general.architecture", ""))
        self.tensors = {t.name: self._view(raw, t) for t in header.tensors}

    def _view(self, raw: np.ndarray, info: TensorInfo) -> Tensor:
        kind = GGMLQuantizationType(info.kind)
        rows = int(np.prod(info.shape[1:]))
        data = raw[info.start : info.start + info.nbytes]
        if kind in PLAIN:
            data = data.view(PLAIN[kind])
        data = data.reshape(rows, -1) if len(info.shape) > 1 else data
        return Tensor(info.name, info.shape, kind, data)

    def get(self, name: str) -> Tensor:
        if name not in self.tensors:
            raise ModelError(f"{self.path}: no tensor {name!r}")
        return self.tensors[name]

    def has(self, name: str) -> bool:
        return name in self.tensors

    @staticmethod
    def kind(tensor: Tensor) -> int:
        return int(tensor.tensor_type)

    def dense(self, tensor: Tensor, rows: np.ndarray | None = None) -> torch.Tensor:
        """float32 (out, in) or (n,), by gguf-py's dequantize: the values transformers
        loads, so `dtype float32` on the same file holds the same numbers."""
        from gguf.quants import dequantize

        self.release()
        values = dequantize(np.asarray(tensor.data), tensor.tensor_type).astype(np.float32)
        if rows is not None:
            values = values[rows]
        return torch.from_numpy(np.ascontiguousarray(values))

    def blocks(self, parts: list[tuple[Tensor, np.ndarray | None]]) -> torch.Tensor:
        """The tensors' blocks stacked by rows, each in its row order (None: as stored):
        one tensor as stored is a view of the map (packing copies it; kept as it is, its
        pages are the file's), anything else is copied out of the map once."""
        self.release()
        if len(parts) == 1 and parts[0][1] is None:
            return torch.from_numpy(parts[0][0].data)
        views = [t.data if rows is None else t.data[rows] for t, rows in parts]
        return torch.from_numpy(np.concatenate(views))

    def release(self) -> None:
        """Hand the map's resident pages back to the page cache (a view still in use reads
        them again from there); each read calls it first."""
        self._map.madvise(mmap.MADV_DONTNEED)


def layer_norms(layer: DecoderLayer, cfg: ModelConfig) -> list[tuple[nn.Module, str]]:
    """A layer's norms and llama.cpp's names of their tensors: ffn_norm is the MLP's
    input norm, Llama's post_attention_layernorm and Gemma's pre_feedforward_layernorm."""
    attn = layer.self_attn
    norms: list[tuple[nn.Module | None, str]] = [(layer.input_layernorm, "attn_norm")]
    if cfg.sandwich_norms:
        norms += [
            (layer.post_attention_layernorm, "post_attention_norm"),
            (layer.pre_feedforward_layernorm, "ffn_norm"),
            (layer.post_feedforward_layernorm, "post_ffw_norm"),
        ]
    else:
        norms.append((layer.post_attention_layernorm, "ffn_norm"))
    if cfg.qk_norm:
        norms += [(attn.q_norm, "attn_q_norm"), (attn.k_norm, "attn_k_norm")]
    return [(module, name) for module, name in norms if module is not None]


def unpermute(rows: int, heads: int) -> np.ndarray:
    """Row order that undoes llama.cpp's permute of a q or k projection with `heads`
    heads (transformers' _reverse_permute_weights, applied to row indices)."""
    return np.arange(rows).reshape(heads, rows // heads // 2, 2).swapaxes(1, 2).reshape(rows)


def gguf_config(path: Path | GGUFWeights, cfg: ModelConfig) -> ModelConfig:
    """cfg, read through transformers' conversion of the file's metadata, with what that
    leaves out: the head width (attention.key_length; transformers reads it for Gemma 3
    only), the rope scaling as llama.cpp reads it (file_rope; Gemma 3's is its global
    layers'), a rope_freqs
    tensor, llama.cpp's form of Llama 3's rope scaling (the inverse frequencies divided
    by its factors; it replaces a llama3 scaling, being one), a Llama or Mistral file's
    sliding window (on every layer, as transformers' Mistral applies it; llama.cpp runs
    these files without one), and Gemma 3's query scale as llama.cpp sets it (the file
    has no query_pre_attn_scalar: the head width, or hidden / heads for the 27B)."""
    weights = path if isinstance(path, GGUFWeights) else GGUFWeights(path)
    meta, arch = weights.metadata, weights.arch
    key_length = meta.get(f"{arch}.attention.key_length")
    if isinstance(key_length, int) and key_length > 0:
        cfg = replace(cfg, head_dim=key_length)
    window = meta.get(f"{arch}.attention.sliding_window")
    context = meta.get(f"{arch}.context_length")
    full = isinstance(context, int) and isinstance(window, int) and window >= context
    if arch in WINDOWED and isinstance(window, int) and window > 0 and not full:
        cfg = replace(cfg, sliding_window=window, layer_types=(SLIDING,) * cfg.num_layers)
    if arch == "gemma3":
        wide = cfg.num_layers == GEMMA3_27B_LAYERS
        scalar = cfg.hidden_size // cfg.num_heads if wide else cfg.head_dim
        cfg = replace(cfg, attention_scale=float(scalar) ** -0.5)
    cfg = replace(cfg, rope=file_rope(meta, arch, cfg.rope, weights.path))
    if weights.has("rope_freqs.weight"):
        factors = weights.dense(weights.get("rope_freqs.weight")).reshape(-1)
        if factors.numel() != cfg.head_dim // 2:
            raise ModelError(
                f"{weights.path}: rope_freqs has {factors.numel()} factors for a head of "
                f"{cfg.head_dim}"
            )
        kind = "default" if cfg.rope.kind == "llama3" else cfg.rope.kind
        cfg = replace(cfg, rope=replace(cfg.rope, kind=kind, freq_factors=tuple(factors.tolist())))
    return cfg


def file_rope(meta: dict[str, object], arch: str, rope: Rope, path: Path) -> Rope:
    """`rope` with the file's scaling, as llama.cpp reads it: the type (linear where a factor
    comes without one) and the factor (`rope.scaling.factor`, else the older
    `rope.scale_linear`; none, 0 or 1: no scaling). YaRN is transformers' with the same
    numbers: its original context `rope.scaling.original_context_length` (else the
    context length), the ramp between 32 and 1 rotations, and cos and sin scaled by
    0.1 ln(factor) + 1, which is what llama.cpp's ggml_rope_ext computes for it. Any other
    type is refused (ModelError): it would run approximately. (The keys that change
    YaRN's numbers, such as its attention factor, are refused by gguf_support as
    metadata gen does not know.)"""
    factor = meta.get(f"{arch}.rope.scaling.factor", meta.get(f"{arch}.rope.scale_linear"))
    scaling = meta.get(f"{arch}.rope.scaling.type", "linear")
    if scaling not in ("none", "linear", "yarn"):
        raise ModelError(f"{path}: rope scaling {scaling!r} in a GGUF file is not run")
    if scaling == "none" or not isinstance(factor, int | float) or factor in (0, 1):
        return rope
    if scaling == "linear":
        return replace(rope, kind="linear", factor=float(factor))
    original = meta.get(f"{arch}.rope.scaling.original_context_length")
    if not isinstance(original, int) or original <= 0:
        original = meta.get(f"{arch}.context_length")
    if not isinstance(original, int) or original <= 0:
        raise ModelError(f"{path}: YaRN scaling without an original context length")
    return replace(rope, kind="yarn", factor=float(factor),
                   original_max_position_embeddings=original, attention_factor=None,
                   beta_fast=32.0, beta_slow=1.0, mscale=None, mscale_all_dim=None,
                   truncate=True)  # fmt: skip


def load_gguf_model(
    path: Path, cfg: ModelConfig, kernels: ModuleType
) -> tuple[LlamaModel, Counter[str]]:
    """The model with its projections on the file's blocks; the second value counts the
    weights by how they run ("Q4_1", "Q8_0", "float32"). cfg as gguf_config completes it
    (done here too)."""
    weights = GGUFWeights(path)
    cfg = gguf_config(weights, cfg)
    with torch.device("meta"):
        model = LlamaModel(cfg, init=False)
    counts: Counter[str] = Counter()
    permuted = weights.arch in PERMUTED_ARCHS

    def linear(parts: list[tuple[str, int | None]], bias: bool) -> nn.Module:
        """One projection from the file's tensors `parts` stacked by rows; each part with
        the heads whose permute to undo (None: as stored)."""
        tensors = [weights.get(f"{name}.weight") for name, _ in parts]
        orders = [
            unpermute(t.data.shape[0], heads) if permuted and heads else None
            for t, (_, heads) in zip(tensors, parts, strict=True)
        ]
        biases = None
        if bias:
            biases = torch.cat(
                [weights.dense(weights.get(f"{name}.bias"), order) for (name, _), order in
                 zip(parts, orders, strict=True)]
            )  # fmt: skip
        kinds = [weights.kind(t) for t in tensors]
        in_features = int(tensors[0].shape[0])  # GGUF shapes are (in, out)
        if all(runs(kind, in_features) for kind in kinds):
            for t, kind in zip(tensors, kinds, strict=True):
                counts[NAMES[kind]] += t.n_elements
            if len(set(kinds)) == 1:
                blocks = weights.blocks(list(zip(tensors, orders, strict=True)))
                return QuantLinear(blocks, kinds[0], in_features, kernels, biases)
            rows = np.cumsum([0] + [t.data.shape[0] for t in tensors])
            return QuantStack([
                QuantLinear(weights.blocks([(t, order)]), kind, in_features, kernels,
                            None if biases is None else biases[start:end])
                for t, order, kind, start, end in
                zip(tensors, orders, kinds, rows[:-1], rows[1:], strict=True)
            ])  # fmt: skip
        dense = torch.cat([weights.dense(t, o) for t, o in zip(tensors, orders, strict=True)])
        counts["float32"] += dense.numel()
        plain = nn.Linear(dense.shape[1], dense.shape[0], bias=biases is not None)
        plain.weight = nn.Parameter(dense, requires_grad=False)
        if biases is not None:
            plain.bias = nn.Parameter(biases, requires_grad=False)
        return packed_linears.float32_linear(plain, kernels)

    def norm(module: nn.Module, name: str) -> None:
        module.weight = nn.Parameter(weights.dense(weights.get(name)), requires_grad=False)

    h, kvh = cfg.num_heads, cfg.num_kv_heads
    layers: list[DecoderLayer] = list(model.layers)  # type: ignore[arg-type]
    for i, layer in enumerate(layers):
        blk = f"blk.{i}"
        attn, mlp = layer.self_attn, layer.mlp
        projections: tuple[tuple[nn.Module, str, list[tuple[str, int | None]]], ...] = (
            (
                attn,
                "qkv_proj",
                [(f"{blk}.attn_q", h), (f"{blk}.attn_k", kvh), (f"{blk}.attn_v", None)],
            ),
            (attn, "o_proj", [(f"{blk}.attn_output", None)]),
            (mlp, "gate_up_proj", [(f"{blk}.ffn_gate", None), (f"{blk}.ffn_up", None)]),
            (mlp, "down_proj", [(f"{blk}.ffn_down", None)]),
        )
        biased = {"qkv_proj": cfg.attention_bias, "o_proj": cfg.output_bias}
        for parent, name, parts in projections:  # (the layer was built with nn.Linear)
            setattr(parent, name, linear(parts, bias=biased.get(name, False)))
        for module, tensor in layer_norms(layer, cfg):
            norm(module, f"{blk}.{tensor}.weight")
    norm(model.norm, "output_norm.weight")

    embed = weights.get("token_embd.weight")
    dim = cfg.hidden_size
    if runs(weights.kind(embed), dim):
        quant = QuantEmbedding(weights.blocks([(embed, None)]), weights.kind(embed), dim, kernels)
        model.embed_tokens = quant  # type: ignore[assignment]
        tied: nn.Module = quant.linear
        counts[NAMES[weights.kind(embed)]] += embed.n_elements
    else:
        table = weights.dense(embed)
        model.embed_tokens = nn.Embedding.from_pretrained(table, freeze=True)
        plain = nn.Linear(dim, table.shape[0], bias=False)
        plain.weight = model.embed_tokens.weight
        tied = packed_linears.float32_linear(plain, kernels)
        counts["float32"] += table.numel()
    if weights.has("output.weight"):
        model.lm_head = linear([("output", None)], bias=False)  # type: ignore[assignment]
    else:
        model.lm_head = tied  # type: ignore[assignment]

    leftover = [n for n, p in model.named_parameters() if p.is_meta]
    leftover += [n for n, b in model.named_buffers() if b.is_meta]
    if leftover:
        raise ModelError(f"{path}: weights missing for {', '.join(leftover[:5])}")
    weights.release()
    model.use_kernels(kernels)
    return model.eval(), counts

"""Llama-family decoder over a slot KV cache: Llama, Mistral, Qwen2, Qwen3, Gemma 3 (text)
and SmolLM3, each a Llama with some of ModelConfig's features (sliding windows, their own
rotary, layers without rotary, norms of queries and keys, sandwich norms, GELU, scaled
embeddings, a cap on the logits).

Pure tensors: token ids and positions in, next-token logits out. The numerics follow
Hugging Face's implementation (float32 RMSNorm, the same rotary tables) so greedy
decoding agrees with `transformers` token for token. q/k/v and gate/up are one product
each (`fuse_checkpoint` stacks a checkpoint's weights so, at load). With `use_kernels`,
every forward runs as a ragged batch of tokens through the kernels of gen.engine.kernels:
the same formulas, each summed in its own fixed order, so a token's result does not
depend on what it is batched with.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import torch
import torch.nn.functional as F
from torch import nn

from gen.engine.config import ACTIVATIONS, ModelConfig, Rope
from gen.engine.kv_cache import KVCache
from gen.engine.rope import rotary_tables


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:
            # one call; bitwise the same as the spelled-out form below
            return F.rms_norm(x, self.weight.shape, self.weight, self.eps)
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Hugging Face's `x * cos + rotate_half(x) * sin`, in the same float operations."""
    return x * cos + rotate_half(x) * sin


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int, rope: int) -> None:
        """rope: which of the model's rotary tables the layer's queries and keys take (-1:
        none, SmolLM3's layers without rotary)."""
        super().__init__()
        self.cfg = cfg
        self.layer = layer
        self.rope = rope
        self.window = cfg.window(layer)
        hd, h, kvh = cfg.head_dim, cfg.num_heads, cfg.num_kv_heads
        # q, k and v in one product: the checkpoint's q_proj, k_proj and v_proj stacked
        # (see fuse_checkpoint)
        self.qkv_proj = nn.Linear(cfg.hidden_size, (h + 2 * kvh) * hd, bias=cfg.attention_bias)
        self.o_proj = nn.Linear(h * hd, cfg.hidden_size, bias=cfg.output_bias)
        self.q_norm = RMSNorm(hd, cfg.rms_norm_eps) if cfg.qk_norm else None
        self.k_norm = RMSNorm(hd, cfg.rms_norm_eps) if cfg.qk_norm else None

    def forward(self, x: torch.Tensor, batch: Batch) -> torch.Tensor:
        cfg = self.cfg
        b, t, _ = x.shape
        hd, kvh, g = cfg.head_dim, cfg.num_kv_heads, cfg.group_size
        h = cfg.num_heads
        qkv = self.qkv_proj(x).view(b, t, h + 2 * kvh, hd)  # (B, T, H + 2 KVH, D)
        qk = qkv[:, :, : h + kvh]
        if self.q_norm is not None and self.k_norm is not None:
            qk = torch.cat((self.q_norm(qk[:, :, :h]), self.k_norm(qk[:, :, h:])), dim=2)
        if self.rope >= 0:  # q and k side by side: one rotary pass for both
            cos, sin = batch.rotary[self.rope]  # (B, T, 1, D)
            qk = apply_rotary(qk, cos, sin)
        q, k = qk[:, :, :h], qk[:, :, h:]
        v = qkv[:, :, h + kvh :]
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, heads, T, D)
        cache = batch.cache
        cache.write(self.layer, batch.slots, batch.positions, k, v)
        keys, values = cache.read(self.layer, batch.slots, batch.length, batch.contiguous)
        capacity = cache.k[self.layer].shape[2]
        if t == 1:
            # decode: grouped-query attention without copying K/V; each KV head serves
            # its group's g query heads, folded into the query axis.
            q = q.reshape(b, kvh, g, hd)  # (B, KVH, G, D)
            mask = batch.mask(self.window, capacity)
            out = F.scaled_dot_product_attention(
                q, keys, values, attn_mask=mask, scale=cfg.attention_scale
            )
        else:
            # prefill: a one-off per sequence; expand K/V heads like Hugging Face does
            keys = keys.repeat_interleave(g, dim=1)  # (B, H, L, D)
            values = values.repeat_interleave(g, dim=1)
            mask = batch.mask(self.window, capacity)
            out = F.scaled_dot_product_attention(
                q, keys, values, attn_mask=mask, is_causal=batch.causal and mask is None,
                scale=cfg.attention_scale,
            )  # fmt: skip
        out = out.reshape(b, cfg.num_heads, t, hd).transpose(1, 2).reshape(b, t, -1)
        return self.o_proj(out)  # (B, T, C)


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        # gate and up in one product: the checkpoint's gate_proj and up_proj stacked
        self.gate_up_proj = nn.Linear(cfg.hidden_size, 2 * cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)
        self.gelu = cfg.activation == "gelu_tanh"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        act = F.gelu(gate, approximate="tanh") if self.gelu else F.silu(gate)
        return self.down_proj(act * up)


class DecoderLayer(nn.Module):
    """Llama's pre-norm layer; with sandwich norms (Gemma) the attention's and the MLP's
    outputs are normed too before they join the residual stream. The checkpoints' names:
    Llama's post_attention_layernorm is the MLP's input norm, Gemma's the attention's
    output norm (its MLP's input norm is pre_feedforward_layernorm)."""

    def __init__(self, cfg: ModelConfig, layer: int, rope: int) -> None:
        super().__init__()
        eps = cfg.rms_norm_eps
        self.self_attn = Attention(cfg, layer, rope)
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, eps)
        sandwich = cfg.sandwich_norms
        self.pre_feedforward_layernorm = RMSNorm(cfg.hidden_size, eps) if sandwich else None
        self.post_feedforward_layernorm = RMSNorm(cfg.hidden_size, eps) if sandwich else None

    def norms(self) -> tuple[RMSNorm | None, RMSNorm, RMSNorm | None]:
        """The norms of the attention's output (or None), the MLP's input and the MLP's
        output (or None)."""
        if self.pre_feedforward_layernorm is None:
            return None, self.post_attention_layernorm, None
        return (
            self.post_attention_layernorm,
            self.pre_feedforward_layernorm,
            self.post_feedforward_layernorm,
        )

    def forward(self, x: torch.Tensor, batch: Batch) -> torch.Tensor:
        attn_out, mlp_in, mlp_out = self.norms()
        r = self.self_attn(self.input_layernorm(x), batch)
        x = x + (r if attn_out is None else attn_out(r))
        r = self.mlp(mlp_in(x))
        return x + (r if mlp_out is None else mlp_out(r))


class Batch:
    """Per-forward inputs shared by every layer: where each row's tokens go and may look."""

    __slots__ = (
        "all_visible",
        "cache",
        "causal",
        "contiguous",
        "length",
        "masks",
        "positions",
        "rotary",
        "slots",
    )

    def __init__(
        self,
        cache: KVCache,
        slots: torch.Tensor,
        positions: torch.Tensor,
        tables: list[tuple[torch.Tensor, torch.Tensor]],
    ) -> None:
        b, t = positions.shape
        self.cache = cache
        self.slots = slots  # (B,)
        self.positions = positions  # (B, T)
        self.length = int(positions.max()) + 1
        self.contiguous = bool(torch.equal(slots, torch.arange(b)))
        # each table's cos and sin at the positions: (B, T, 1, D) each
        self.rotary = [(c[positions].unsqueeze(2), s[positions].unsqueeze(2)) for c, s in tables]
        first = int(positions[:, 0].min())
        # a fresh prompt attends causally to itself: SDPA's own causal path, no mask
        self.causal = t > 1 and first == 0 and self.length == t
        # decoding with every row at the same length: all keys are visible
        self.all_visible = t == 1 and first == self.length - 1
        self.masks: dict[tuple[int | None, int], torch.Tensor | None] = {}

    def mask(self, window: int | None, capacity: int) -> torch.Tensor | None:
        """The additive mask (B, 1, T, keys) of a layer whose tokens see `window` positions
        (None: all before them) in a cache row of `capacity` (a window layer's row may be a
        ring: position p at p % capacity); None where none is needed (self.causal, or
        every key visible)."""
        key = (window, capacity)
        if key not in self.masks:
            self.masks[key] = self._mask(window, capacity)
        return self.masks[key]

    def _mask(self, window: int | None, capacity: int) -> torch.Tensor | None:
        whole = capacity >= self.length and (window is None or window >= self.length)
        if whole and (self.causal or self.all_visible):
            return None
        last = self.positions[:, -1:]  # (B, 1): each row's latest position
        index = torch.arange(min(self.length, capacity))
        held = (last - (last - index[None, :]) % capacity)[:, None, :]  # (B, 1, keys)
        query = self.positions[:, :, None]  # (B, T, 1)
        visible = (held >= 0) & (held <= query)  # (B, T, keys) causal per row
        if window is not None:
            visible &= held > query - window
        # an additive mask (0 / -inf) takes SDPA's fast CPU path; a boolean one may not
        return torch.zeros(visible.shape).masked_fill(~visible, float("-inf")).unsqueeze(1)


Product = tuple[torch.Tensor, int, "torch.Tensor | None"]  # weight or blocks, kind, bias


def product(module: nn.Module) -> Product | None:
    """What the kernels take for a product module (its `product()`: a float32 weight, kind
    0, or GGUF blocks and their type, and the bias); None for one they do not run (int8)."""
    spec = getattr(module, "product", None)
    return spec() if callable(spec) else None


def part_products(module: nn.Module) -> list[Product] | None:
    """A product module's parts as the kernels' `layers` takes them: its product, or each
    part's where its outputs are its parts' side by side (QuantStack); None where some
    part has no kernel."""
    parts = getattr(module, "parts", None)
    found = [product(m) for m in parts] if isinstance(parts, nn.ModuleList) else [product(module)]
    specs = [spec for spec in found if spec is not None]
    return specs if len(specs) == len(found) else None


def rows(module: nn.Module, kernels: ModuleType) -> Callable[..., torch.Tensor]:
    """A product module as forward_tokens' loop calls it, on (N, in) rows: its kernel in
    one call where it has one, else its forward."""
    spec = product(module)
    if spec is None:
        return module.forward
    weight, kind, bias = spec
    if kind == 0:
        return lambda x, prompt=None: kernels.linear(x, weight, bias)
    return lambda x, prompt=None: kernels.qlinear(x, weight, kind, bias)


Norms = tuple["torch.Tensor | None", ...]  # a layer's six norm weights (LayerPlan.norms)


@dataclass(slots=True)
class LayerPlan:
    """One decoder layer as forward_tokens runs it: its products as plain calls (no
    nn.Module call machinery per product, see `rows`), the weights of its norms (those of
    q's and k's heads, the attention's output, the MLP's input, the MLP's output, and the
    next layer's input norm or the last one; None where the layer has no such norm), its
    window (0: none) and rotary table (-1: none). They hold the modules' weights, so a
    swapped module means a new plan (use_kernels makes one)."""

    layer: int
    qkv: Callable[..., torch.Tensor]
    o: Callable[..., torch.Tensor]
    gate_up: Callable[..., torch.Tensor]
    down: Callable[..., torch.Tensor]
    norms: Norms
    window: int
    rope: int


@dataclass(slots=True)
class Stack:
    """Every layer's products, norms, rotary tables and windows as the kernels' `layers`
    takes them: the whole loop in one call, where every product runs on the kernels."""

    weights: list[torch.Tensor]
    kinds: list[int]
    biases: list[torch.Tensor | None]
    norms: list[torch.Tensor | None]
    ropes: list[int]
    windows: list[int]
    parts: list[int]  # per product: how many of weights, kinds and biases it takes


class LlamaModel(nn.Module):
    def __init__(self, cfg: ModelConfig, init: bool = True) -> None:
        """init=False: the loaders' form, built on the meta device for weights that come
        after; the embedding skips its random init (on meta, `normal_` imports about 1.8 s
        of torch._dynamo)."""
        super().__init__()
        self.cfg = cfg
        table = None if init else torch.empty(cfg.vocab_size, cfg.hidden_size)
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size, _weight=table)
        # the rotary embeddings the layers take (Gemma 3: the global and the local one)
        layer_ropes = [cfg.layer_rope(i) for i in range(cfg.num_layers)]
        self.ropes: list[Rope] = list(dict.fromkeys(r for r in layer_ropes if r is not None))
        self.layers = nn.ModuleList(
            DecoderLayer(cfg, i, -1 if r is None else self.ropes.index(r))
            for i, r in enumerate(layer_ropes)
        )
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        self._tables: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        self.kernels: ModuleType | None = None
        self._plans: list[LayerPlan] | None = None
        self._stack: Stack | bool | None = None  # False: some product has no kernel
        # prompt pieces and decoding rows in separate forwards (int8: its activation scale
        # is taken per call, and a prompt's outliers would coarsen the decoding rows')
        self.split_prompts = False

    def use_kernels(self, kernels: ModuleType | None) -> None:
        """Run the model through the float32 kernels of gen.engine.kernels (forward_tokens);
        None goes back to the PyTorch forms. Swap modules (pack_linears, q8) before, not
        after: forward_tokens keeps their kernels and weights in its plans."""
        self.kernels = kernels
        self._plans = None
        self._stack = None

    def _layer_parts(self) -> list[tuple[list[nn.Module], Norms, Attention]]:
        """Each layer's products (qkv, o, gate_up, down), its norms as LayerPlan holds
        them, and its attention."""
        layers: list[DecoderLayer] = list(self.layers)  # type: ignore[arg-type]
        after: list[RMSNorm] = [layer.input_layernorm for layer in layers[1:]] + [self.norm]
        parts: list[tuple[list[nn.Module], Norms, Attention]] = []
        for layer, next_norm in zip(layers, after, strict=True):
            attn, mlp = layer.self_attn, layer.mlp
            products: list[nn.Module] = [attn.qkv_proj, attn.o_proj, mlp.gate_up_proj,
                                         mlp.down_proj]  # fmt: skip
            norms = (attn.q_norm, attn.k_norm, *layer.norms(), next_norm)
            parts.append((products, tuple(None if n is None else n.weight for n in norms), attn))
        return parts

    def plans(self) -> list[LayerPlan]:
        if self._plans is None:
            kernels = self.kernels
            assert kernels is not None
            self._plans = [
                LayerPlan(
                    i,
                    rows(products[0], kernels),
                    rows(products[1], kernels),
                    rows(products[2], kernels),
                    rows(products[3], kernels),
                    norms,
                    attn.window or 0,
                    attn.rope,
                )
                for i, (products, norms, attn) in enumerate(self._layer_parts())
            ]
        return self._plans

    def stack(self) -> Stack | None:
        """The layers for the kernels' `layers` call; None where a product has no kernel
        (int8), or kernels without that call."""
        if self._stack is None:
            parts = self._layer_parts()
            found = [part_products(m) for modules, _, _ in parts for m in modules]
            specs = [s for each in found if each is not None for s in each]
            usable = None not in found and hasattr(self.kernels, "layers")
            self._stack = (
                Stack(
                    [w for w, _, _ in specs],
                    [k for _, k, _ in specs],
                    [b for _, _, b in specs],
                    [n for _, norms, _ in parts for n in norms],
                    [attn.rope for _, _, attn in parts],
                    [attn.window or 0 for _, _, attn in parts],
                    [len(each or ()) for each in found],
                )
                if usable
                else False
            )
        return self._stack if isinstance(self._stack, Stack) else None

    def tables(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """cos and sin (max_position_embeddings, head_dim) of each of self.ropes."""
        if self._tables is None:
            length = self.cfg.max_position_embeddings
            self._tables = [rotary_tables(self.cfg, length, rope) for rope in self.ropes]
        return self._tables

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The embeddings of the ids, times the config's scale (Gemma's sqrt(hidden), a
        float32 number as Hugging Face's Gemma3TextScaledWordEmbedding multiplies)."""
        x = self.embed_tokens(input_ids)
        if self.cfg.embedding_scale != 1.0:
            x = x * torch.tensor(self.cfg.embedding_scale, dtype=x.dtype)
        return x

    def head(self, h: torch.Tensor) -> torch.Tensor:
        """Logits from the last norm's output; capped, cap * tanh(logits / cap), where the
        config says (Gemma's final_logit_softcapping)."""
        logits = self.lm_head(h)
        cap = self.cfg.final_softcap
        return logits if not cap else torch.tanh(logits / cap) * cap

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        slots: torch.Tensor,
        cache: KVCache,
        all_logits: bool = False,
    ) -> torch.Tensor:
        """Next-token logits (B, vocab) after the last column of each row; with all_logits,
        after every column (B, T, vocab).

        input_ids, positions: (B, T), every row T real tokens; slots: (B,) cache rows.
        """
        if self.takes_tokens(cache):
            b, t = input_ids.shape
            n = b * t
            last = torch.arange(n) if all_logits else torch.arange(t - 1, n, t)
            logits = self.forward_tokens(
                input_ids.reshape(n),
                positions.reshape(n),
                slots.repeat_interleave(t),
                cache,
                last,
                prompt=t > 1,
            )
            return logits.view(b, t, -1) if all_logits else logits
        batch = Batch(cache, slots, positions, self.tables())
        x = self.embed(input_ids)  # (B, T, C)
        for layer in self.layers:
            x = layer(x, batch)
        if not all_logits:
            x = x[:, -1, :]  # (B, C)
        return self.head(self.norm(x))  # (B, vocab) or (B, T, vocab)

    def takes_tokens(self, cache: KVCache) -> bool:
        """Can forward_tokens run: kernels in use, and what the attention kernel needs (a
        float32 cache, head_dim a multiple of 8)?"""
        return (
            self.kernels is not None and cache.dtype == torch.float32 and self.cfg.head_dim % 8 == 0
        )

    def forward_tokens(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        slots: torch.Tensor,
        cache: KVCache,
        last: torch.Tensor,
        prompt: bool = True,
    ) -> torch.Tensor:
        """A ragged batch through the fused kernels (use_kernels first): token i is
        input_ids[i] at positions[i] of cache row slots[i], all (N,). Prompt pieces of
        several rows and decoding rows go in one call; a row's earlier positions must be
        cached already or come earlier in the call. Returns the logits after the tokens
        at the indices `last` (R,): (R, vocab). prompt: some row runs several tokens.

        Every residual add is fused into the norm after it: the same sums as
        DecoderLayer, in fewer calls."""
        kernels = self.kernels
        assert kernels is not None
        cfg = self.cfg
        heads, kv_heads, eps = cfg.num_heads, cfg.num_kv_heads, cfg.rms_norm_eps
        scale = cfg.attention_scale or 0.0
        tables = self.tables()
        add_norm = kernels.add_rms_norm_  # x += r in place, then RMSNorm(x)
        x = self.embed(input_ids)  # (N, C)
        first: RMSNorm = self.layers[0].input_layernorm  # type: ignore[assignment]
        h = kernels.rms_norm(x, first.weight, eps)
        stack = self.stack()
        if stack is not None:  # the loop below in one call
            h = kernels.layers(
                x, h, stack.weights, stack.kinds, stack.biases, stack.norms, eps,
                cache.k, cache.v, slots, positions, [c for c, _ in tables],
                [s for _, s in tables], stack.ropes, stack.windows, heads, kv_heads, scale,
                ACTIVATIONS.index(cfg.activation), stack.parts,
            )  # fmt: skip
            return self.head(h[last])  # (R, vocab)
        act = kernels.gelu_tanh_mul if cfg.activation == "gelu_tanh" else kernels.silu_mul
        shape = (input_ids.shape[0], heads + 2 * kv_heads, cfg.head_dim)
        for p in self.plans():
            q_norm, k_norm, attn_out, mlp_in, mlp_out, after = p.norms
            qkv = p.qkv(h).view(shape)  # (N, H + 2 KVH, D)
            if q_norm is not None:
                kernels.qk_norm_(qkv, q_norm, k_norm, heads, kv_heads, eps)
            if p.rope >= 0:
                kernels.rotary_(qkv, positions, *tables[p.rope], heads + kv_heads)
            out = kernels.attention(
                qkv, cache.k[p.layer], cache.v[p.layer], slots, positions, heads, kv_heads,
                p.window, scale,
            )  # (N, H * D)  # fmt: skip
            r = p.o(out)
            if attn_out is not None:
                r = kernels.rms_norm(r, attn_out, eps)
            h = add_norm(x, r, mlp_in, eps)
            r = p.down(act(p.gate_up(h)), prompt)
            if mlp_out is not None:
                r = kernels.rms_norm(r, mlp_out, eps)
            h = add_norm(x, r, after, eps)
        return self.head(h[last])  # (R, vocab)


FUSED = (("qkv_proj", ("q_proj", "k_proj", "v_proj")), ("gate_up_proj", ("gate_proj", "up_proj")))


def offset_norms(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A Gemma state dict's norm weights as this model's RMSNorm applies them: Gemma's
    scales by 1 + w, computed in float32 (Hugging Face's Gemma3RMSNorm), so w becomes
    1 + w, the same float32 numbers."""
    return {
        key: 1.0 + value.float() if key.endswith("norm.weight") else value
        for key, value in state.items()
    }


def fuse_checkpoint(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A Hugging Face Llama state dict in this model's form: each layer's q/k/v projections
    (weights and biases) stacked into qkv_proj, gate and up into gate_up_proj. Entries
    already fused, or not of a projection, pass through."""
    out = dict(state)
    for key in state:
        for fused, names in FUSED:
            prefix, dot, kind = key.rpartition(f".{names[0]}.")
            if not dot:
                continue
            parts = [f"{prefix}.{n}.{kind}" for n in names]
            if all(p in out for p in parts):
                out[f"{prefix}.{fused}.{kind}"] = torch.cat([out.pop(p) for p in parts])
    return out

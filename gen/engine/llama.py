"""Llama-family decoder (Llama, Mistral without sliding window, Qwen2) over a slot KV cache.

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

from gen.engine.config import ModelConfig
from gen.engine.kv_cache import KVCache


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


def rotary_tables(cfg: ModelConfig, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin tables (length, head_dim) as Hugging Face's default rotary embedding builds them."""
    d = cfg.head_dim
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    pos = torch.arange(length, dtype=torch.float32)
    freqs = pos[:, None] * inv_freq[None, :]  # (L, d/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (L, d)
    return emb.cos(), emb.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Hugging Face's `x * cos + rotate_half(x) * sin`, in the same float operations."""
    return x * cos + rotate_half(x) * sin


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.layer = layer
        hd, h, kvh = cfg.head_dim, cfg.num_heads, cfg.num_kv_heads
        # q, k and v in one product: the checkpoint's q_proj, k_proj and v_proj stacked
        # (see fuse_checkpoint)
        self.qkv_proj = nn.Linear(cfg.hidden_size, (h + 2 * kvh) * hd, bias=cfg.attention_bias)
        self.o_proj = nn.Linear(h * hd, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor, batch: Batch) -> torch.Tensor:
        cfg = self.cfg
        b, t, _ = x.shape
        hd, kvh, g = cfg.head_dim, cfg.num_kv_heads, cfg.group_size
        h = cfg.num_heads
        cos, sin = batch.cos, batch.sin  # (B, T, 1, D)
        qkv = self.qkv_proj(x).view(b, t, h + 2 * kvh, hd)  # (B, T, H + 2 KVH, D)
        # q and k side by side: one rotary pass for both
        qk = apply_rotary(qkv[:, :, : h + kvh], cos, sin)
        q, k = qk[:, :, :h], qk[:, :, h:]
        v = qkv[:, :, h + kvh :]
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, heads, T, D)
        batch.cache.write(self.layer, batch.slots, batch.positions, k, v)
        keys, values = batch.cache.read(self.layer, batch.slots, batch.length, batch.contiguous)
        if t == 1:
            # decode: grouped-query attention without copying K/V; each KV head serves
            # its group's g query heads, folded into the query axis.
            q = q.reshape(b, kvh, g, hd)  # (B, KVH, G, D)
            out = F.scaled_dot_product_attention(q, keys, values, attn_mask=batch.mask)
        else:
            # prefill: a one-off per sequence; expand K/V heads like Hugging Face does
            keys = keys.repeat_interleave(g, dim=1)  # (B, H, L, D)
            values = values.repeat_interleave(g, dim=1)
            out = F.scaled_dot_product_attention(
                q, keys, values, attn_mask=batch.mask, is_causal=batch.causal
            )
        out = out.reshape(b, cfg.num_heads, t, hd).transpose(1, 2).reshape(b, t, -1)
        return self.o_proj(out)  # (B, T, C)


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        # gate and up in one product: the checkpoint's gate_proj and up_proj stacked
        self.gate_up_proj = nn.Linear(cfg.hidden_size, 2 * cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int) -> None:
        super().__init__()
        self.self_attn = Attention(cfg, layer)
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x: torch.Tensor, batch: Batch) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), batch)
        return x + self.mlp(self.post_attention_layernorm(x))


class Batch:
    """Per-forward inputs shared by every layer: where each row's tokens go and may look."""

    __slots__ = (
        "cache",
        "causal",
        "contiguous",
        "cos",
        "length",
        "mask",
        "positions",
        "sin",
        "slots",
    )

    def __init__(
        self,
        cache: KVCache,
        slots: torch.Tensor,
        positions: torch.Tensor,
        tables: tuple[torch.Tensor, torch.Tensor],
    ) -> None:
        b, t = positions.shape
        self.cache = cache
        self.slots = slots  # (B,)
        self.positions = positions  # (B, T)
        self.length = int(positions.max()) + 1
        self.contiguous = bool(torch.equal(slots, torch.arange(b)))
        self.cos = tables[0][positions].unsqueeze(2)  # (B, T, 1, D)
        self.sin = tables[1][positions].unsqueeze(2)
        first = int(positions[:, 0].min())
        # a fresh prompt attends causally to itself: SDPA's own causal path, no mask
        self.causal = t > 1 and first == 0 and self.length == t
        self.mask: torch.Tensor | None = None
        if self.causal or (t == 1 and first == self.length - 1):
            return  # decode with every row at the same length: all keys are visible
        keys = torch.arange(self.length)
        visible = keys[None, None, :] <= positions[:, :, None]  # (B, T, L) causal per row
        # an additive mask (0 / -inf) takes SDPA's fast CPU path; a boolean one may not
        self.mask = torch.zeros(visible.shape).masked_fill(~visible, float("-inf")).unsqueeze(1)


Product = tuple[torch.Tensor, int, "torch.Tensor | None"]  # weight or blocks, kind, bias


def product(module: nn.Module) -> Product | None:
    """What the kernels take for a product module (its `product()`: a float32 weight, kind
    0, or GGUF blocks and their type, and the bias); None for one they do not run (int8)."""
    spec = getattr(module, "product", None)
    return spec() if callable(spec) else None


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


@dataclass(slots=True)
class LayerPlan:
    """One decoder layer as forward_tokens runs it: its products as plain calls (no
    nn.Module call machinery per product, see `rows`) and the norms that follow its two
    halves. They hold the modules' weights, so a swapped module means a new plan
    (use_kernels makes one)."""

    layer: int
    qkv: Callable[..., torch.Tensor]
    o: Callable[..., torch.Tensor]
    gate_up: Callable[..., torch.Tensor]
    down: Callable[..., torch.Tensor]
    post: tuple[torch.Tensor, float]  # the norm after attention: weight, eps
    after: tuple[torch.Tensor, float]  # after the MLP: the next layer's input norm, or the last


@dataclass(slots=True)
class Stack:
    """Every layer's products and norms as the kernels' `layers` takes them: the whole
    loop in one call, where every product runs on the kernels."""

    weights: list[torch.Tensor]
    kinds: list[int]
    biases: list[torch.Tensor | None]
    norms: list[torch.Tensor]
    eps: list[float]


class LlamaModel(nn.Module):
    def __init__(self, cfg: ModelConfig, init: bool = True) -> None:
        """init=False: the loaders' form, built on the meta device for weights that come
        after; the embedding skips its random init (on meta, `normal_` imports about 1.8 s
        of torch._dynamo)."""
        super().__init__()
        self.cfg = cfg
        table = None if init else torch.empty(cfg.vocab_size, cfg.hidden_size)
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size, _weight=table)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        self._tables: tuple[torch.Tensor, torch.Tensor] | None = None
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

    def _layer_parts(self) -> list[tuple[list[nn.Module], RMSNorm, RMSNorm]]:
        """Each layer's products (qkv, o, gate_up, down) and the norms after its halves."""
        layers: list[DecoderLayer] = list(self.layers)  # type: ignore[arg-type]
        after: list[RMSNorm] = [layer.input_layernorm for layer in layers[1:]] + [self.norm]
        return [
            (
                [layer.self_attn.qkv_proj, layer.self_attn.o_proj, layer.mlp.gate_up_proj,
                 layer.mlp.down_proj],
                layer.post_attention_layernorm,
                norm,
            )
            for layer, norm in zip(layers, after, strict=True)
        ]  # fmt: skip

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
                    (post.weight, post.eps),
                    (after.weight, after.eps),
                )
                for i, (products, post, after) in enumerate(self._layer_parts())
            ]
        return self._plans

    def stack(self) -> Stack | None:
        """The layers for the kernels' `layers` call; None where a product has no kernel
        (int8), or kernels without that call."""
        if self._stack is None:
            parts = self._layer_parts()
            found = [product(m) for products, _, _ in parts for m in products]
            specs = [s for s in found if s is not None]
            norms = [norm for _, post, after in parts for norm in (post, after)]
            usable = len(specs) == len(found) and hasattr(self.kernels, "layers")
            self._stack = (
                Stack(
                    [w for w, _, _ in specs],
                    [k for _, k, _ in specs],
                    [b for _, _, b in specs],
                    [n.weight for n in norms],
                    [n.eps for n in norms],
                )
                if usable
                else False
            )
        return self._stack if isinstance(self._stack, Stack) else None

    def tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._tables is None:
            self._tables = rotary_tables(self.cfg, self.cfg.max_position_embeddings)
        return self._tables

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
        x = self.embed_tokens(input_ids)  # (B, T, C)
        for layer in self.layers:
            x = layer(x, batch)
        if not all_logits:
            x = x[:, -1, :]  # (B, C)
        return self.lm_head(self.norm(x))  # (B, vocab) or (B, T, vocab)

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
        heads, kv_heads = cfg.num_heads, cfg.num_kv_heads
        cos, sin = self.tables()
        add_norm = kernels.add_rms_norm_  # x += r in place, then RMSNorm(x)
        x = self.embed_tokens(input_ids)  # (N, C)
        first: RMSNorm = self.layers[0].input_layernorm  # type: ignore[assignment]
        h = kernels.rms_norm(x, first.weight, first.eps)
        stack = self.stack()
        if stack is not None:  # the loop below in one call
            h = kernels.layers(
                x, h, stack.weights, stack.kinds, stack.biases, stack.norms, stack.eps,
                cache.k, cache.v, slots, positions, cos, sin, heads, kv_heads,
            )  # fmt: skip
            return self.lm_head(h[last])  # (R, vocab)
        shape = (input_ids.shape[0], heads + 2 * kv_heads, cfg.head_dim)
        for p in self.plans():
            qkv = p.qkv(h).view(shape)  # (N, H + 2 KVH, D)
            kernels.rotary_(qkv, positions, cos, sin, heads + kv_heads)
            out = kernels.attention(
                qkv, cache.k[p.layer], cache.v[p.layer], slots, positions, heads, kv_heads
            )  # (N, H * D)
            h = add_norm(x, p.o(out), *p.post)
            h = add_norm(x, p.down(kernels.silu_mul(p.gate_up(h)), prompt), *p.after)
        return self.lm_head(h[last])  # (R, vocab)


FUSED = (("qkv_proj", ("q_proj", "k_proj", "v_proj")), ("gate_up_proj", ("gate_proj", "up_proj")))


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

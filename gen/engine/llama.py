"""Llama-family decoder (Llama, Mistral without sliding window, Qwen2) over a slot KV cache.

Pure tensors: token ids and positions in, next-token logits out. The numerics follow
Hugging Face's implementation (float32 RMSNorm, the same rotary tables) so greedy
decoding agrees with `transformers` token for token. With `use_kernels`, norms, rotary,
SiLU, the residual adds and decoding attention run as the fused kernels of
gen.engine.kernels: the same formulas, summed in their own fixed order.
"""

from __future__ import annotations

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
        self.kernels: ModuleType | None = None  # gen.engine.kernels, once enabled

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kernels is not None:
            return self.kernels.rms_norm(x, self.weight, self.eps)
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
        self.q_proj = nn.Linear(cfg.hidden_size, h * hd, bias=cfg.attention_bias)
        self.k_proj = nn.Linear(cfg.hidden_size, kvh * hd, bias=cfg.attention_bias)
        self.v_proj = nn.Linear(cfg.hidden_size, kvh * hd, bias=cfg.attention_bias)
        self.o_proj = nn.Linear(h * hd, cfg.hidden_size, bias=False)
        self.qkv_proj: nn.Module | None = None  # q, k and v in one product, once fused
        self.kernels: ModuleType | None = None

    def forward(self, x: torch.Tensor, batch: Batch) -> torch.Tensor:
        cfg = self.cfg
        b, t, _ = x.shape
        hd, kvh, g = cfg.head_dim, cfg.num_kv_heads, cfg.group_size
        h = cfg.num_heads
        if self.kernels is not None and self.qkv_proj is not None:
            qkv = self.qkv_proj(x).view(b * t, h + 2 * kvh, hd)
            cos, sin = batch.tables
            self.kernels.rotary_(qkv, batch.positions.reshape(-1), cos, sin, h + kvh)
            if t == 1 and batch.cache.dtype == torch.float32 and hd % 8 == 0:
                # decode: store this step's keys and values, attend, in one call per layer
                cache = batch.cache
                out = self.kernels.decode_attention(
                    qkv, cache.k[self.layer], cache.v[self.layer], batch.slots,
                    batch.positions.reshape(-1), h, kvh,
                )  # fmt: skip
                return self.o_proj(out.view(b, 1, h * hd))
            qkv = qkv.view(b, t, h + 2 * kvh, hd)
            q, k, v = qkv[:, :, :h], qkv[:, :, h : h + kvh], qkv[:, :, h + kvh :]
        elif self.qkv_proj is not None:
            cos, sin = batch.cos, batch.sin  # (B, T, 1, D)
            qkv = self.qkv_proj(x).view(b, t, h + 2 * kvh, hd)  # (B, T, H + 2 KVH, D)
            # q and k side by side: one rotary pass for both
            qk = apply_rotary(qkv[:, :, : h + kvh], cos, sin)
            q, k = qk[:, :, :h], qk[:, :, h:]
            v = qkv[:, :, h + kvh :]
        else:
            cos, sin = batch.cos, batch.sin
            q = apply_rotary(self.q_proj(x).view(b, t, h, hd), cos, sin)
            k = apply_rotary(self.k_proj(x).view(b, t, kvh, hd), cos, sin)
            v = self.v_proj(x).view(b, t, kvh, hd)
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
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)
        self.gate_up_proj: nn.Module | None = None  # gate and up in one product, once fused
        self.kernels: ModuleType | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate_up_proj is not None and self.kernels is not None:
            return self.down_proj(self.kernels.silu_mul(self.gate_up_proj(x)))
        if self.gate_up_proj is not None:
            gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
            return self.down_proj(F.silu(gate) * up)
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


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
        "tables",
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
        self.tables = tables  # (max positions, D) cos and sin
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


class LlamaModel(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        self._tables: tuple[torch.Tensor, torch.Tensor] | None = None
        self.kernels: ModuleType | None = None

    def use_kernels(self, kernels: ModuleType | None) -> None:
        """Run norms, rotary and SiLU (and the residual adds) through the fused float32
        kernels of gen.engine.kernels; None goes back to the PyTorch forms."""
        self.kernels = kernels
        for module in self.modules():
            if isinstance(module, (RMSNorm, Attention, MLP)):
                module.kernels = kernels

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
        batch = Batch(cache, slots, positions, self.tables())
        x = self.embed_tokens(input_ids)  # (B, T, C)
        if self.kernels is not None:
            return self.lm_head(self._fused_layers(self.kernels, x, batch, all_logits))
        for layer in self.layers:
            x = layer(x, batch)
        if not all_logits:
            x = x[:, -1, :]  # (B, C)
        return self.lm_head(self.norm(x))  # (B, vocab) or (B, T, vocab)

    def _fused_layers(
        self, kernels: ModuleType, x: torch.Tensor, batch: Batch, all_logits: bool
    ) -> torch.Tensor:
        """The decoder layers with each residual add fused into the norm after it: the
        same sums as DecoderLayer, in fewer calls. Returns the final norm's output."""
        add_norm = kernels.add_rms_norm_  # x += r in place, then RMSNorm(x)
        layers: list[DecoderLayer] = list(self.layers)  # type: ignore[arg-type]
        h = layers[0].input_layernorm(x)
        for i, layer in enumerate(layers):
            post = layer.post_attention_layernorm
            h = add_norm(x, layer.self_attn(h, batch), post.weight, post.eps)
            after = layers[i + 1].input_layernorm if i + 1 < len(layers) else self.norm
            h = add_norm(x, layer.mlp(h), after.weight, after.eps)
        return h if all_logits else h[:, -1, :]

"""Rotary embedding tables: the inverse frequencies of each rope kind exactly as
transformers' modeling_rope_utils computes them (the same float operations, so the tables
agree to the bit), and the cos/sin tables every position reads.

`dynamic` is the default rotary up to max_position_embeddings (transformers rescales only
past it, where the engine never goes). A GGUF file's rope_freqs (Rope.freq_factors)
divide the inverse frequencies, as llama.cpp applies them.
"""

from __future__ import annotations

import math

import torch

from gen.engine.config import ModelConfig, Rope


def exponents(dim: int) -> torch.Tensor:
    """(0, 2, 4, ... dim - 2) / dim in float32, as transformers makes them."""
    return torch.arange(0, dim, 2, dtype=torch.int64).float() / dim


def inv_freq(rope: Rope, dim: int, max_positions: int) -> tuple[torch.Tensor, float]:
    """The inverse frequencies (dim / 2,) and the factor on cos and sin (yarn's)."""
    base = rope.theta
    if rope.kind == "dynamic":  # transformers' formula at seq_len = max_position_embeddings
        factor = rope.factor
        base = base * ((factor * max_positions / max_positions) - (factor - 1)) ** (dim / (dim - 2))
    freqs = 1.0 / (base ** exponents(dim))
    scaling = 1.0
    if rope.kind == "linear":
        freqs /= rope.factor
    elif rope.kind == "llama3":
        freqs = llama3(rope, freqs)
    elif rope.kind == "yarn":
        freqs, scaling = yarn(rope, dim)
    if rope.freq_factors:
        if len(rope.freq_factors) != dim // 2:
            raise ValueError(f"{len(rope.freq_factors)} rope_freqs for a head of {dim}")
        freqs = freqs / torch.tensor(rope.freq_factors, dtype=torch.float32)
    return freqs, scaling


def llama3(rope: Rope, freqs: torch.Tensor) -> torch.Tensor:
    """Llama 3.1's scaling: low frequencies divided by factor, high ones kept, a smooth
    blend between (transformers' _compute_llama3_parameters)."""
    factor = rope.factor
    low, high = rope.low_freq_factor, rope.high_freq_factor
    old = rope.original_max_position_embeddings
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = 2 * math.pi / freqs
    scaled = torch.where(wavelen > low_wavelen, freqs / factor, freqs)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


def yarn(rope: Rope, dim: int) -> tuple[torch.Tensor, float]:
    """YaRN's blend of interpolated and extrapolated frequencies, and its attention factor
    (transformers' _compute_yarn_parameters)."""
    base, factor = rope.theta, rope.factor
    original = rope.original_max_position_embeddings
    scaling = rope.attention_factor
    if scaling is None:
        if rope.mscale and rope.mscale_all_dim:
            scaling = mscale(factor, rope.mscale) / mscale(factor, rope.mscale_all_dim)
        else:
            scaling = mscale(factor)

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(rope.beta_fast), correction_dim(rope.beta_slow)
    if rope.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # (transformers': no division by zero)
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    extra = 1 - ramp
    return interpolation * (1 - extra) + extrapolation * extra, float(scaling)


def mscale(scale: float, m: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def rotary_tables(
    cfg: ModelConfig, length: int, rope: Rope | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin tables (length, head_dim) of `rope` (default: cfg.rope) as transformers'
    rotary embeddings build them."""
    freqs, scaling = inv_freq(rope or cfg.rope, cfg.head_dim, cfg.max_position_embeddings)
    pos = torch.arange(length, dtype=torch.float32)
    angles = pos[:, None] * freqs[None, :]  # (L, d/2)
    emb = torch.cat((angles, angles), dim=-1)  # (L, d)
    return emb.cos() * scaling, emb.sin() * scaling

"""GGUF blocks for the kernels' tests: valid random blocks of every type the kernels read
(and of one they do not, Q2_K), and the packed kernels' sums written out in numpy, in
their order, from the blocks' bytes (an independent reading of each layout, checked
against gguf-py's dequantize)."""

from __future__ import annotations

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize, quantize

from gen.engine.quantised import (
    BF16,
    BLOCK_WEIGHTS,
    F16,
    Q4_0,
    Q4_1,
    Q4_K,
    Q5_0,
    Q5_1,
    Q5_K,
    Q6_K,
    Q8_0,
)

Q2_K = 10  # a type the kernels do not read
TYPES = {kind: GGMLQuantizationType(kind) for kind in [*BLOCK_WEIGHTS, Q2_K]}
# made here by gguf-py's quantize (F16 and BF16: their numbers); the rest at random
QUANTISED = (Q4_0, Q4_1, Q8_0, F16, BF16)
# the float16 fields of a block: (byte offset, log2 of the smallest and largest magnitude;
# below -14, subnormal)
HALVES = {
    Q5_0: [(0, -16, -4)],
    Q5_1: [(0, -16, -4), (2, -16, -4)],
    Q4_K: [(0, -18, -12), (2, -18, -12)],
    Q5_K: [(0, -18, -12), (2, -18, -12)],
    Q6_K: [(208, -18, -12)],
    Q2_K: [(80, -18, -12), (82, -18, -12)],
}


def block_weights(kind: int) -> int:
    """The kernels' block: 256 weights for the K-quants, else 32."""
    return BLOCK_WEIGHTS[kind]


def make_blocks(
    kind: int, rows: int, K: int, rng: np.random.Generator, values: np.ndarray | None = None
) -> np.ndarray:
    """(rows, K / block weights * block bytes) uint8 blocks of `kind`: `values` (by
    default a normal matrix, F16's and BF16's of magnitudes from 2**-20, float16's
    subnormals, to 4) quantised by gguf-py where it can, else random bytes (every bit
    pattern of quants and scales) with finite float16 scales of either sign."""
    if kind in QUANTISED:
        if values is None:
            values = rng.standard_normal((rows, K), dtype=np.float32)
            if kind in (F16, BF16):
                values *= 2.0 ** rng.uniform(-20, 2, (rows, K)).astype(np.float32)
        return quantize(values, TYPES[kind]).view(np.uint8)
    size, nbytes = GGML_QUANT_SIZES[TYPES[kind]]
    raw = rng.integers(0, 256, (rows, K // size, nbytes), dtype=np.uint8)
    for at, low, high in HALVES[kind]:
        shape = raw.shape[:2]
        value = rng.choice([-1.0, 1.0], shape) * 2.0 ** rng.uniform(low, high, shape)
        raw[..., at : at + 2] = value.astype(np.float16)[..., None].view(np.uint8)
    return raw.reshape(rows, -1)


def dense(raw: np.ndarray, kind: int) -> np.ndarray:
    """The float32 matrix the blocks stand for, by gguf-py."""
    return dequantize(raw, TYPES[kind]).astype(np.float32)


def f32(v: np.ndarray) -> np.ndarray:
    return v.astype(np.float32)


def packed_form(raw: np.ndarray, kind: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The blocks as the packed kernels read them, per block of 32 weights: the quants q
    (rows, blocks, 32), integers, and the factors a and b (rows, blocks), float32, of the
    weights a q + b (Q4_0: d and -8 d, Q4_1 and Q5_1: d and m, Q5_0: d and -16 d; Q4_K's
    and Q5_K's sub-blocks: d * sc and -dmin * min); for Q6_K, whose quants are less 32, the scales
    d * sc of the block's two sub-blocks of 16."""
    n = raw.shape[0]
    blocks = raw.reshape(n, -1, GGML_QUANT_SIZES[TYPES[kind]][1])

    def half(at: int) -> np.ndarray:
        return blocks[..., at : at + 2].copy().view(np.float16)[..., 0].astype(np.float32)

    def nibbles(qs: np.ndarray) -> np.ndarray:  # weights 0..15 low, 16..31 high
        return np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.int64)

    if kind == Q6_K:  # weight 128h + 32t + l: a nibble of ql[64h + 32 (t % 2) + l] (the
        # low one for t < 2), the top two bits at 2t in qh[32h + l]
        ql = blocks[..., :128].reshape(n, -1, 2, 2, 32).astype(np.int64)
        low = np.stack([ql[..., 0, :], ql[..., 1, :], ql[..., 0, :] >> 4, ql[..., 1, :] >> 4], 3)
        qh = blocks[..., 128:192].reshape(n, -1, 2, 1, 32).astype(np.int64)
        top = (qh >> (2 * np.arange(4))[:, None]) & 3
        q = ((low & 0x0F) | (top << 4)).reshape(n, -1, 32) - 32
        scales = half(208)[..., None] * blocks[..., 192:208].view(np.int8).astype(np.float32)
        scales = scales.reshape(n, -1, 2)
        return q, scales[..., 0], scales[..., 1]
    d = half(0)
    if kind in (Q4_K, Q5_K):  # sub-block 2c: the low nibbles of bytes 32c.., 2c + 1: the
        # high ones; Q5_K's fifth bit of weight l of sub-block j: bit j of qh[l]
        s = blocks[..., 4:16].astype(np.int64)  # 6-bit scales and minimums, packed
        sc = np.concatenate([s[..., 0:4] & 63, (s[..., 8:12] & 15) | (s[..., 0:4] >> 6 << 4)], -1)
        mn = np.concatenate([s[..., 4:8] & 63, (s[..., 8:12] >> 4) | (s[..., 4:8] >> 6 << 4)], -1)
        at = 16 if kind == Q4_K else 48
        qs = blocks[..., at : at + 128].reshape(n, -1, 4, 32).astype(np.int64)
        q = np.stack([qs & 0x0F, qs >> 4], axis=3).reshape(n, -1, 32)
        if kind == Q5_K:
            qh = blocks[..., None, 16:48].astype(np.int64)
            q = q | (((qh >> np.arange(8)[:, None]) & 1) << 4).reshape(q.shape)
        a = d[..., None] * sc.astype(np.float32)
        b = -(half(2)[..., None] * mn.astype(np.float32))
        return q, a.reshape(n, -1), b.reshape(n, -1)
    at = {Q4_0: 2, Q4_1: 4, Q5_0: 6, Q5_1: 8}[kind]  # the nibbles, after (Q5) qh
    q = nibbles(blocks[..., at : at + 16])
    if kind in (Q5_0, Q5_1):
        qh = blocks[..., at - 4 : at].copy().view("<u4")
        q |= ((qh >> np.arange(32, dtype=np.uint32)) & 1).astype(np.int64) << 4
    offset = {Q4_0: -8, Q5_0: -16}
    b = half(2) if kind in (Q4_1, Q5_1) else d * np.float32(offset[kind])
    return q, d, b


def packed_weights(raw: np.ndarray, kind: int) -> np.ndarray:
    """The weights of packed_form, (rows, K) float32: a q + b, each operation rounded
    (Q6_K: a q and b q)."""
    q, a, b = packed_form(raw, kind)
    if kind == Q6_K:
        w = np.concatenate([a[..., None] * q[..., :16], b[..., None] * q[..., 16:]], axis=-1)
    else:
        w = a[..., None] * q.astype(np.float32) + b[..., None]
    return w.astype(np.float32).reshape(raw.shape[0], -1)


def packed_reference(
    x: np.ndarray, raw: np.ndarray, kind: int, bias: np.ndarray | None
) -> np.ndarray:
    """x @ W^T (+ bias) for blocks `raw` of a factored type, in the packed kernels' order:
    per block of 32, lo = x_0 q_0 + ... + x_15 q_15 and hi = x_16 q_16 + ... + x_31 q_31,
    each a chain of fused multiply-adds from 0, then acc = fma(a, lo + hi, acc) and
    acc = fma(b, the block's sum of x, acc) (Q6_K: acc = fma(a, lo, acc) and
    acc = fma(b, hi, acc)), block after block; then + bias. A fused multiply-add is
    emulated in float64 (exact products of a float32 and a quant or a scale), rounded
    once to float32."""
    q, a, b = (v.astype(np.float64) for v in packed_form(raw, kind))
    x64 = x.astype(np.float64)
    acc = np.zeros((x.shape[0], raw.shape[0]), dtype=np.float32)
    for blk in range(q.shape[1]):
        xb = x[:, 32 * blk : 32 * blk + 32]
        lanes = f32(f32(xb[:, 0:8] + xb[:, 8:16]) + f32(xb[:, 16:24] + xb[:, 24:32]))
        t = f32(lanes[:, :4] + lanes[:, 4:])  # fold(): (t0 + t2) + (t1 + t3)
        sx = f32(f32(t[:, 0] + t[:, 2]) + f32(t[:, 1] + t[:, 3])).astype(np.float64)
        halves = []
        for start in (0, 16):
            chain = np.zeros_like(acc)
            for j in range(start, start + 16):
                chain = f32(x64[:, 32 * blk + j, None] * q[None, :, blk, j] + chain)
            halves.append(chain)
        if kind == Q6_K:
            acc = f32(a[None, :, blk] * halves[0].astype(np.float64) + acc)
            acc = f32(b[None, :, blk] * halves[1].astype(np.float64) + acc)
            continue
        both = f32(halves[0] + halves[1]).astype(np.float64)
        acc = f32(a[None, :, blk] * both + acc)
        acc = f32(b[None, :, blk] * sx[:, None] + acc)
    return acc if bias is None else f32(acc + bias)

"""Layers that run a GGUF file's own quantised blocks (`dtype gguf`).

The weights stay as the file stores them, blocks of 32 with a float16 scale (Q4_0, Q5_0,
Q8_0) or a scale and a minimum (Q4_1, Q5_1), or the K-quants' superblocks of 256 (Q4_K,
Q5_K: eight sub-blocks of 32, a 6-bit scale and minimum each under float16 ones; Q6_K:
sixteen of 16 with an 8-bit scale each), or float16 and bfloat16 numbers (F16, BF16),
and the compiled kernels (gen.engine.kernels `qlinear`, `qrows`) read them in place;
activations stay float32.

Blocks are packed at load (`qpack`), eight rows side by side, from about the bytes the
file holds:
- Q8_0: each weight made by gguf-py's formula and summed in the float32 kernel's order,
  so a product equals, bit for bit, the float32 product over the dequantised matrix;
- the others: rows in lanes, each block of 32's sum factored as gguf-py's formula allows
  (d * sum x q + m * sum x; Q6_K: d * sum x q for each half), so a weight is never made:
  a third less work per weight, and one fixed order for every output whatever its batch.
  The last bits differ from the float32 product's (the bundled model's greedy tokens and
  perplexity do not: tests).
Rows whose count is not a multiple of 8, and F16 and BF16 matrices, stay as the file has
them, dequantised (widened) in registers, bit for bit the float32 product.
"""

from __future__ import annotations

from types import ModuleType

import torch
from torch import nn

F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 = 1, 2, 3, 6, 7, 8  # ggml's type numbers
Q4_K, Q5_K, Q6_K, BF16 = 12, 13, 14, 30
BLOCK = 32
BLOCK_BYTES = {Q4_0: 18, Q4_1: 20, Q5_0: 22, Q5_1: 24, Q8_0: 34, Q4_K: 144, Q5_K: 176, Q6_K: 210}
BLOCK_BYTES |= {F16: 64, BF16: 64}  # numbers, read 32 at a time
BLOCK_WEIGHTS = {kind: 256 if kind in (Q4_K, Q5_K, Q6_K) else BLOCK for kind in BLOCK_BYTES}
NAMES = {Q4_0: "Q4_0", Q4_1: "Q4_1", Q5_0: "Q5_0", Q5_1: "Q5_1", Q8_0: "Q8_0"}
NAMES |= {Q4_K: "Q4_K", Q5_K: "Q5_K", Q6_K: "Q6_K", F16: "F16", BF16: "BF16"}
PACKS = frozenset(BLOCK_BYTES) - {F16, BF16}  # block types the kernels pack (qpack)
NUMBERS = {F16: torch.float16, BF16: torch.bfloat16}  # the plain types, as torch dtypes
PACKED = 0x100  # the kernels' flag on a block type: the blocks are packed
PACK_ROWS = 8


def runs(kind: int, in_features: int | None = None) -> bool:
    """Do the kernels read this block type in place (over rows of `in_features`: whole
    blocks)?"""
    if kind not in BLOCK_BYTES:
        return False
    return in_features is None or (in_features > 0 and in_features % BLOCK_WEIGHTS[kind] == 0)


def as_bytes(blocks: torch.Tensor, kind: int) -> torch.Tensor:
    """Blocks as the kernels take them, (rows, row bytes) uint8, contiguous: F16's and
    BF16's numbers seen as their bytes."""
    if blocks.dtype == torch.uint8:
        return blocks.contiguous()
    if NUMBERS.get(kind) != blocks.dtype:
        raise ValueError(f"{blocks.dtype} numbers are not {NAMES.get(kind, kind)} blocks")
    return blocks.contiguous().view(torch.uint8)


class QuantLinear(nn.Module):
    """y = x W^T + b with W (out, in) given as GGUF blocks: blocks (out, in / block weights
    * block bytes), uint8, one row of blocks per output (F16, BF16: or their numbers,
    (out, in)). Blocks of a multiple of 8 rows are held packed (`packed`), and the blocks
    as given are not kept."""

    def __init__(
        self,
        blocks: torch.Tensor,
        kind: int,
        in_features: int,
        kernels: ModuleType,
        bias: torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        if not runs(kind, in_features):
            raise ValueError(f"no kernel for block type {kind} over {in_features} inputs")
        blocks = as_bytes(blocks, kind)
        if blocks.shape[1] != in_features // BLOCK_WEIGHTS[kind] * BLOCK_BYTES[kind]:
            raise ValueError(f"{tuple(blocks.shape)} blocks do not hold rows of {in_features}")
        self.in_features = in_features
        self.out_features = blocks.shape[0]
        self.kind = kind
        self.kernels = kernels
        self.packed = kind in PACKS and self.out_features % PACK_ROWS == 0
        self.blocks = kernels.qpack(blocks, kind, in_features) if self.packed else blocks
        self.bias = None if bias is None else bias.detach().float().contiguous()

    def forward(self, x: torch.Tensor, prompt: bool | None = None) -> torch.Tensor:
        shape = x.shape
        y = self.kernels.qlinear(x.reshape(-1, self.in_features), *self.product())
        return y.view(*shape[:-1], self.out_features)

    def product(self) -> tuple[torch.Tensor, int, torch.Tensor | None]:
        """What the kernels take for this product: the blocks, their type, the bias."""
        return self.blocks, self.kind | (PACKED if self.packed else 0), self.bias

    def extra_repr(self) -> str:
        packed = ", packed" if self.packed else ""
        return f"in={self.in_features}, out={self.out_features}, {NAMES[self.kind]}{packed}"


class QuantStack(nn.Module):
    """A projection whose rows come from parts of different block types, each a
    QuantLinear, their outputs side by side (a GGUF file's q, k and v stacked into one
    projection, v in another type, as llama.cpp's Q4_K_M files have them). No one kernel
    call takes it: it has no `product()`, and runs as a module."""

    def __init__(self, parts: list[QuantLinear]) -> None:
        super().__init__()
        self.parts = nn.ModuleList(parts)
        self.in_features = parts[0].in_features
        self.out_features = sum(part.out_features for part in parts)

    def forward(self, x: torch.Tensor, prompt: bool | None = None) -> torch.Tensor:
        return torch.cat([part(x, prompt) for part in self.parts], dim=-1)


class QuantEmbedding(nn.Module):
    """Embedding rows looked up in GGUF blocks and dequantised (only the rows used)."""

    def __init__(self, blocks: torch.Tensor, kind: int, dim: int, kernels: ModuleType) -> None:
        super().__init__()
        self.blocks = as_bytes(blocks, kind)
        self.kind = kind
        self.linear = QuantLinear(self.blocks, kind, dim, kernels)  # the same weights serve lm_head
        self.dim = dim

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        rows = self.linear.kernels.qrows(self.blocks, self.kind, self.dim, ids.reshape(-1))
        return rows.view(*ids.shape, self.dim)


def quantise_q8_0(weight: torch.Tensor) -> torch.Tensor:
    """Q8_0 blocks of a float (out, in) matrix, in = a multiple of 32, by gguf-py's
    quantize (llama.cpp's reference rounding): one float16 scale per 32 weights."""
    from gguf import GGMLQuantizationType
    from gguf.quants import quantize

    values = weight.detach().float().contiguous().numpy()
    return torch.from_numpy(quantize(values, GGMLQuantizationType.Q8_0))


def q8_linears(
    model: nn.Module, kernels: ModuleType, blocks: dict[str, torch.Tensor] | None = None
) -> dict[str, torch.Tensor]:
    """Swap every float nn.Linear in `model` whose inputs are whole blocks for a Q8_0
    QuantLinear (`dtype q8`). `blocks` holds blocks made earlier, by the linear's name
    (a cache); returns the blocks used, by name."""
    used: dict[str, torch.Tensor] = {}
    for parent_name, parent in list(model.named_modules()):
        for name, child in list(parent.named_children()):
            if not isinstance(child, nn.Linear) or child.in_features % BLOCK:
                continue
            key = f"{parent_name}.{name}" if parent_name else name
            made = (blocks or {}).get(key)
            if made is None or made.shape != (child.out_features, child.in_features // BLOCK * 34):
                made = quantise_q8_0(child.weight)
            used[key] = made
            setattr(parent, name, QuantLinear(made, Q8_0, child.in_features, kernels, child.bias))
    return used

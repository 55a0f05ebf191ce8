"""Linear layers on faster kernels than nn.Linear's.

- `KernelLinear` (float32, the default where gen.engine.kernels builds): the engine's own
  AVX2 matrix product, about as fast as oneDNN for batches and prompts and much faster
  for decoding a few rows (it streams the weights at close to the memory bus's speed).
  Each output is summed in one fixed order, so a row's bits do not depend on its batch.
- `PackedLinear` (float32, where the kernels are unavailable): weights pre-packed for
  oneDNN, which runs the small-batch products of decoding about 1.2-1.6x faster here than
  the default BLAS path. The same float32 matmul; a row's result does not depend on the
  other rows of the batch (bitwise).
- `Int8Linear` (`dtype int8`): int8 weights, one scale per output channel, and int8
  activations quantised on the fly (fbgemm's dynamic quantised linear). A quarter of the
  bytes to read per token. Output differs from float32; the activation scale is taken
  over all the rows of a call, so a row's result can depend on what it is batched with
  and on how much of its prompt was copied from the prefix cache.
  The MLP's down projection runs a call in float32 when it holds a prompt piece of
  several tokens (see INT8_PROMPT_FLOAT32), decoding rows batched with it included; a
  prompt piece of one token (the last one after a prefix copy, or a chunk boundary)
  counts as decoding there, so chunking can also change a row's int8 result.
"""

from __future__ import annotations

import warnings
from types import ModuleType

import torch
from torch import nn

BATCH_HINT = 8  # the batch size oneDNN lays the weights out for


def available() -> bool:
    return bool(torch.backends.mkldnn.is_available()) and hasattr(
        torch.ops.mkldnn, "_linear_pointwise"
    )


class PackedLinear(nn.Module):
    def __init__(self, linear: nn.Linear, batch_hint: int = BATCH_HINT) -> None:
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        with torch.inference_mode():
            weight = linear.weight.detach()
            self.packed = torch.ops.mkldnn._reorder_linear_weight(weight, batch_hint)
        self.bias = None if linear.bias is None else linear.bias.detach()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        y = torch.ops.mkldnn._linear_pointwise(
            x.reshape(-1, self.in_features), self.packed, self.bias, "none", [], ""
        )  # (N, out)
        return y.view(*shape[:-1], self.out_features)


class KernelLinear(nn.Module):
    def __init__(self, linear: nn.Linear, kernels: ModuleType) -> None:
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.kernels = kernels
        self.weight = linear.weight.detach().contiguous()  # (out, in), as nn.Linear keeps it
        self.bias = None if linear.bias is None else linear.bias.detach().contiguous()

    def forward(self, x: torch.Tensor, prompt: bool | None = None) -> torch.Tensor:
        shape = x.shape
        y = self.kernels.linear(x.reshape(-1, self.in_features), self.weight, self.bias)
        return y.view(*shape[:-1], self.out_features)

    def product(self) -> tuple[torch.Tensor, int, torch.Tensor | None]:
        """What the kernels take for this product: the float32 weight (kind 0), the bias."""
        return self.weight, 0, self.bias


def float32_linear(linear: nn.Linear, kernels: ModuleType | None) -> nn.Module:
    return PackedLinear(linear) if kernels is None else KernelLinear(linear, kernels)


def int8_available() -> bool:
    return "fbgemm" in torch.backends.quantized.supported_engines


class Int8Linear(nn.Module):
    """prompt_float32: also keep the float32 weights, for calls of several tokens per row
    (prompts); single-token rows (decoding) still run in int8."""

    def __init__(
        self, linear: nn.Linear, prompt_float32: bool = False, kernels: ModuleType | None = None
    ) -> None:
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.prompt = float32_linear(linear, kernels) if prompt_float32 else None
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # quantized tensor constructors are "deprecated"
            weight = linear.weight.detach().float()
            scales = (weight.abs().amax(dim=1) / 127).clamp(min=1e-12).double()
            zeros = torch.zeros(weight.shape[0], dtype=torch.long)
            q = torch.quantize_per_channel(weight, scales, zeros, 0, torch.qint8)
            bias = None if linear.bias is None else linear.bias.detach().float()
            self.packed = torch.ops.quantized.linear_prepack(q, bias)

    def forward(self, x: torch.Tensor, prompt: bool | None = None) -> torch.Tensor:
        """prompt: the call holds a prompt piece of several tokens; None: judge by the
        shape (B, T, in) with T > 1."""
        shape = x.shape
        if prompt is None:
            prompt = x.dim() > 2 and shape[-2] > 1
        if self.prompt is not None and prompt:
            return self.prompt(x)
        # reduce_range: 7-bit activations, so AVX2's 16-bit pair sums cannot saturate
        y = torch.ops.quantized.linear_dynamic(
            x.reshape(-1, self.in_features), self.packed, True
        )  # (N, out)
        return y.view(*shape[:-1], self.out_features)


def pack_linears(model: nn.Module, int8: bool = False, kernels: ModuleType | None = None) -> int:
    """Swap every float32 nn.Linear inside `model` for a KernelLinear (given the compiled
    kernels) or a PackedLinear, or with int8 for an Int8Linear; returns how many."""
    swapped = 0
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, nn.Linear) and child.weight.dtype == torch.float32:
                if int8:
                    new: nn.Module = Int8Linear(child, name in INT8_PROMPT_FLOAT32, kernels)
                else:
                    new = float32_linear(child, kernels)
                setattr(module, name, new)
                swapped += 1
    return swapped


# down_proj reads SiLU(gate) * up. In a prompt, the first tokens' few huge channels set
# the one int8 scale of the whole call and wash out every other row: quantised there, it
# doubles the bundled model's perplexity. Decoding rows are fine in int8.
INT8_PROMPT_FLOAT32 = ("down_proj",)

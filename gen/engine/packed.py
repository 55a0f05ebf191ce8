"""Linear layers with weights pre-packed for oneDNN, which runs the small-batch matrix
products of decoding about 1.2-1.6x faster here than the default BLAS path.

Only the kernel changes; the arithmetic is the same float32 matmul, and greedy output
still matches `transformers` (the real-model parity tests run through this path).
"""

from __future__ import annotations

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


def pack_linears(model: nn.Module) -> int:
    """Swap every float32 nn.Linear inside `model` for a PackedLinear; returns how many."""
    swapped = 0
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, nn.Linear) and child.weight.dtype == torch.float32:
                setattr(module, name, PackedLinear(child))
                swapped += 1
    return swapped

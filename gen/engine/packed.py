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


def _concat(linears: list[nn.Linear]) -> nn.Linear:
    weight = torch.cat([lin.weight.detach() for lin in linears], dim=0)
    biases = [lin.bias for lin in linears]
    fused = nn.Linear(weight.shape[1], weight.shape[0], bias=biases[0] is not None)
    fused.weight = nn.Parameter(weight, requires_grad=False)
    if fused.bias is not None:
        fused.bias = nn.Parameter(torch.cat([b.detach() for b in biases if b is not None]))
    return fused


def fuse_projections(model: nn.Module) -> None:
    """One matrix product for q/k/v and one for gate/up per layer (fewer, larger calls)."""
    for module in model.modules():
        for fused, names in (
            ("qkv_proj", ("q_proj", "k_proj", "v_proj")),
            ("gate_up_proj", ("gate_proj", "up_proj")),
        ):
            if all(isinstance(getattr(module, n, None), nn.Linear) for n in names):
                setattr(module, fused, _concat([getattr(module, n) for n in names]))
                for n in names:
                    delattr(module, n)


def pack_linears(model: nn.Module) -> int:
    """Swap every float32 nn.Linear inside `model` for a PackedLinear; returns how many."""
    swapped = 0
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, nn.Linear) and child.weight.dtype == torch.float32:
                setattr(module, name, PackedLinear(child))
                swapped += 1
    return swapped

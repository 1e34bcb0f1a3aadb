"""Capsule-network layers over torch.ops.halcaps.*.

Weights are Glorot-uniform per capsule transform: each out_dim x in_dim matrix
W[i, j] (a 4x4 pose filter for CapsConv4x4, with its fan-in and fan-out taken
over the filter window) is drawn from U(-a, a), a = sqrt(6 / (fan_in + fan_out)).
"""
import math
from typing import Optional

import torch
from torch import Tensor, nn

from . import _ops


def glorot_uniform_(weight: Tensor, fan_in: int, fan_out: int) -> Tensor:
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    with torch.no_grad():
        return weight.uniform_(-bound, bound)


class CapsulePrediction(nn.Module):
    """u [B, in_caps, in_dim] -> u_hat [B, in_caps, out_caps, out_dim] (the seed blog's op)."""

    def __init__(self, in_caps: int, in_dim: int, out_caps: int, out_dim: int, implementation: str = ""):
        super().__init__()
        self.implementation = implementation
        self.weight = nn.Parameter(torch.empty(in_caps, out_caps, out_dim, in_dim))
        glorot_uniform_(self.weight, in_dim, out_dim)

    def forward(self, u: Tensor) -> Tensor:
        return _ops.predict(u, self.weight, self.implementation)


class Squash(nn.Module):
    """squash over the last dimension."""

    def forward(self, s: Tensor) -> Tensor:
        return _ops.squash(s)


class DigitCaps(nn.Module):
    """Prediction followed by dynamic routing: u [B, in_caps, in_dim] -> v [B, out_caps, out_dim].

    learn_logits: the initial routing logits b0 [in_caps, out_caps] are a
    trained parameter (zeros at start), as in the seed blog; else fixed zeros.
    """

    def __init__(self, in_caps: int, in_dim: int, out_caps: int, out_dim: int, iterations: int = 3,
                 learn_logits: bool = False, implementation: str = ""):
        super().__init__()
        self.iterations = iterations
        self.implementation = implementation
        self.weight = nn.Parameter(torch.empty(in_caps, out_caps, out_dim, in_dim))
        glorot_uniform_(self.weight, in_dim, out_dim)
        self.logits: Optional[nn.Parameter] = nn.Parameter(torch.zeros(in_caps, out_caps)) if learn_logits else None

    def forward(self, u: Tensor) -> Tensor:
        return _ops.digitcaps(u, self.weight, self.logits, self.iterations, self.implementation)

    def extra_repr(self) -> str:
        i, j, e, k = self.weight.shape
        return f"in_caps={i}, in_dim={k}, out_caps={j}, out_dim={e}, iterations={self.iterations}, " \
               f"learn_logits={self.logits is not None}"


class CapsConv4x4(nn.Module):
    """Capsule convolution of 4x4 pose matrices: [n, H, W, in_types, 4, 4] -> [n, OH, OW, out_types, 4, 4]."""

    def __init__(self, in_types: int, out_types: int, kernel_size: int, stride: int = 1, padding: int = 0,
                 implementation: str = ""):
        super().__init__()
        self.stride, self.padding, self.implementation = stride, padding, implementation
        self.weight = nn.Parameter(torch.empty(kernel_size, kernel_size, in_types, out_types, 4, 4))
        window = kernel_size * kernel_size * 4
        glorot_uniform_(self.weight, window * in_types, window * out_types)

    def forward(self, x: Tensor) -> Tensor:
        return _ops.capsconv(x, self.weight, self.stride, self.padding, self.implementation)


def margin_loss(v: Tensor, target: Tensor, m_plus: float = 0.9, m_minus: float = 0.1,
                down_weight: float = 0.5) -> Tensor:
    """Sabour et al.'s margin loss, averaged over the batch.

    v: output capsules [B, classes, dim] (their lengths are the class scores)
    or the lengths [B, classes]; target: class indices [B]."""
    lengths = v.norm(dim=-1) if v.dim() == 3 else v
    present = nn.functional.one_hot(target, lengths.shape[1]).to(lengths.dtype)
    loss = present * torch.relu(m_plus - lengths) ** 2 + \
        down_weight * (1 - present) * torch.relu(lengths - m_minus) ** 2
    return loss.sum(dim=1).mean()

"""halcaps for PyTorch: capsule-network operators compiled ahead of time with Halide.

`import halcaps` registers torch.ops.halcaps.* (CPU and CUDA kernels, fake
kernels for torch.compile / torch.export, autograd). float32 only; inputs that
are not contiguous are copied to contiguous ones first. Bad input raises
TypeError (dtype) or ValueError whose message carries the library's status
name and names the argument.
"""
from . import nn
from ._ops import (LIBRARY_FILE, capsconv, digitcaps, implementations, ops, predict, route, squash)

__all__ = ["LIBRARY_FILE", "capsconv", "digitcaps", "implementations", "nn", "ops", "predict", "route", "squash"]

"""Fake kernels and autograd of torch.ops.halcaps.*, and the functions users call.

The kernels are C++ (csrc/torch_ops.cpp). Here: each operator's fake (meta)
kernel, which gives output shapes for torch.compile and torch.export, and the
autograd formulas, which call the library's backward operators. The backward
operators themselves have no autograd (no double backward).
"""
from typing import Optional

import torch
from torch import Tensor

from . import _library

LIBRARY_FILE = _library.load()
ops = torch.ops.halcaps


# ---- fake kernels ----------------------------------------------------------
# Shapes only; ranks are checked so that a traced call fails with the eager
# call's message. Extents the library compares are checked in the kernels.

def _rank(op: str, name: str, t: Tensor, rank: int, layout: str) -> None:
    if t.dim() != rank:
        raise ValueError(f"halcaps.{op}: bad_rank: {name} must have rank {rank} {layout}, got shape {list(t.shape)}")


def _dtype(op: str, **tensors: Optional[Tensor]) -> None:
    for name, t in tensors.items():
        if t is not None and t.dtype != torch.float32:
            raise TypeError(f"halcaps.{op}: {name} must be float32, got {t.dtype}")


U, W_LAYOUT, UHAT = "[batch, in_caps, in_dim]", "[in_caps, out_caps, out_dim, in_dim]", "[batch, in_caps, out_caps, out_dim]"


def _digitcaps_ranks(op, u, W, b0):
    _dtype(op, u=u, W=W, b0=b0)
    _rank(op, "u", u, 3, U)
    _rank(op, "W", W, 4, W_LAYOUT)
    if b0 is not None:
        _rank(op, "b0", b0, 2, "[in_caps, out_caps]")


@torch.library.register_fake("halcaps::predict")
def _(u, W, implementation=""):
    _dtype("predict", u=u, W=W)
    _rank("predict", "u", u, 3, U)
    _rank("predict", "W", W, 4, W_LAYOUT)
    return u.new_empty((u.shape[0], u.shape[1], W.shape[1], W.shape[2]))


@torch.library.register_fake("halcaps::predict_backward")
def _(g, u, W, implementation=""):
    _dtype("predict_backward", g=g, u=u, W=W)
    _rank("predict_backward", "g", g, 4, UHAT)
    return u.new_empty(u.shape), W.new_empty(W.shape)


@torch.library.register_fake("halcaps::squash")
def _(s, implementation=""):
    _dtype("squash", s=s)
    if s.dim() < 1:
        raise ValueError("halcaps.squash: bad_rank: s must have rank >= 1, got a scalar")
    return s.new_empty(s.shape)


@torch.library.register_fake("halcaps::route")
def _(u_hat, b0, iterations=3, implementation=""):
    _dtype("route", u_hat=u_hat, b0=b0)
    _rank("route", "u_hat", u_hat, 4, UHAT)
    return u_hat.new_empty((u_hat.shape[0], u_hat.shape[2], u_hat.shape[3]))


@torch.library.register_fake("halcaps::route_backward")
def _(u_hat, b0, grad_v, iterations=3, compute_grad_b0=False, implementation=""):
    _dtype("route_backward", u_hat=u_hat, b0=b0, grad_v=grad_v)
    _rank("route_backward", "u_hat", u_hat, 4, UHAT)
    grad_b0 = u_hat.new_empty((u_hat.shape[1], u_hat.shape[2]) if compute_grad_b0 else (0,))
    return u_hat.new_empty(u_hat.shape), grad_b0


@torch.library.register_fake("halcaps::digitcaps")
def _(u, W, b0, iterations=3, implementation=""):
    _digitcaps_ranks("digitcaps", u, W, b0)
    return u.new_empty((u.shape[0], W.shape[1], W.shape[2]))


@torch.library.register_fake("halcaps::digitcaps_with_s")
def _(u, W, b0, iterations=3, implementation=""):
    _digitcaps_ranks("digitcaps_with_s", u, W, b0)
    v = u.new_empty((u.shape[0], W.shape[1], W.shape[2]))
    if iterations < 1:
        raise ValueError(f"halcaps.digitcaps_with_s: unsupported_iterations: iterations must be >= 1, got {iterations}")
    return v, u.new_empty((iterations, u.shape[0], W.shape[1], W.shape[2]))


def _digitcaps_grads_fake(u, W, compute_grad_b0):
    grad_b0 = W.new_empty((W.shape[0], W.shape[1]) if compute_grad_b0 else (0,))
    return u.new_empty(u.shape), W.new_empty(W.shape), grad_b0


@torch.library.register_fake("halcaps::digitcaps_backward")
def _(u, W, b0, grad_v, iterations=3, compute_grad_b0=False, implementation=""):
    _digitcaps_ranks("digitcaps_backward", u, W, b0)
    return _digitcaps_grads_fake(u, W, compute_grad_b0)


@torch.library.register_fake("halcaps::digitcaps_backward_with_s")
def _(u, W, b0, routing_s, grad_v, iterations=3, compute_grad_b0=False, implementation=""):
    _digitcaps_ranks("digitcaps_backward_with_s", u, W, b0)
    return _digitcaps_grads_fake(u, W, compute_grad_b0)


def conv_output_extent(size: int, kernel: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - kernel) // stride + 1


@torch.library.register_fake("halcaps::capsconv")
def _(input, filter, stride=1, pad=0, implementation=""):
    _dtype("capsconv", input=input, filter=filter)
    _rank("capsconv", "input", input, 6, "[n, H, W, in_caps, 4, 4]")
    _rank("capsconv", "filter", filter, 6, "[kh, kw, in_caps, out_caps, 4, 4]")
    if stride < 1 or pad < 0:
        raise ValueError(f"halcaps.capsconv: bad_parameter: stride must be >= 1 and pad >= 0, got {stride}, {pad}")
    oh = conv_output_extent(input.shape[1], filter.shape[0], stride, pad)
    ow = conv_output_extent(input.shape[2], filter.shape[1], stride, pad)
    return input.new_empty((input.shape[0], oh, ow, filter.shape[3], 4, 4))


@torch.library.register_fake("halcaps::capsconv_backward")
def _(input, filter, grad_output, stride=1, pad=0, implementation=""):
    _dtype("capsconv_backward", input=input, filter=filter, grad_output=grad_output)
    return input.new_empty(input.shape), filter.new_empty(filter.shape)


# ---- autograd --------------------------------------------------------------
# Backward operators run with the library's default implementation.

def _predict_setup(ctx, inputs, output):
    u, W, _ = inputs
    ctx.save_for_backward(u, W)


def _predict_backward(ctx, grad_u_hat):
    u, W = ctx.saved_tensors
    grad_u, grad_W = ops.predict_backward(grad_u_hat, u, W)
    return grad_u, grad_W, None


torch.library.register_autograd("halcaps::predict", _predict_backward, setup_context=_predict_setup)


def _squash_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _squash_backward(ctx, grad_v):
    # The library has no squash gradient: this is its formula in torch, with
    # squash(s) = (n2 / (1 + n2)) s / sqrt(n2 + eps), n2 = |s|^2.
    (s,) = ctx.saved_tensors
    eps = 1e-9
    n2 = (s * s).sum(-1, keepdim=True)
    root = torch.sqrt(n2 + eps)
    scale = n2 / ((1 + n2) * root)
    # d scale / d n2
    dscale = (1 / ((1 + n2) * root)) - n2 / ((1 + n2) ** 2 * root) - n2 / (2 * (1 + n2) * root ** 3)
    grad_s = scale * grad_v + 2 * s * dscale * (grad_v * s).sum(-1, keepdim=True)
    return grad_s, None


torch.library.register_autograd("halcaps::squash", _squash_backward, setup_context=_squash_setup)


def _route_setup(ctx, inputs, output):
    u_hat, b0, iterations, _ = inputs
    ctx.save_for_backward(u_hat, b0)
    ctx.iterations = iterations


def _route_backward(ctx, grad_v):
    u_hat, b0 = ctx.saved_tensors
    want_b0 = b0 is not None and ctx.needs_input_grad[1]
    grad_u_hat, grad_b0 = ops.route_backward(u_hat, b0, grad_v, ctx.iterations, want_b0)
    return grad_u_hat, grad_b0 if want_b0 else None, None, None


torch.library.register_autograd("halcaps::route", _route_backward, setup_context=_route_setup)


def _digitcaps_setup(ctx, inputs, output):
    u, W, b0, iterations, _ = inputs
    ctx.save_for_backward(u, W, b0)
    ctx.iterations = iterations


def _digitcaps_backward(ctx, grad_v):
    u, W, b0 = ctx.saved_tensors
    want_b0 = b0 is not None and ctx.needs_input_grad[2]
    grad_u, grad_W, grad_b0 = ops.digitcaps_backward(u, W, b0, grad_v, ctx.iterations, want_b0)
    return grad_u, grad_W, grad_b0 if want_b0 else None, None, None


torch.library.register_autograd("halcaps::digitcaps", _digitcaps_backward, setup_context=_digitcaps_setup)


def _digitcaps_with_s_setup(ctx, inputs, output):
    u, W, b0, iterations, _ = inputs
    v, routing_s = output
    ctx.save_for_backward(u, W, b0, routing_s)
    ctx.mark_non_differentiable(routing_s)
    ctx.iterations = iterations


def _digitcaps_with_s_backward(ctx, grad_v, _grad_routing_s):
    # routing_s is marked non-differentiable: its gradient is not used.
    u, W, b0, routing_s = ctx.saved_tensors
    want_b0 = b0 is not None and ctx.needs_input_grad[2]
    grad_u, grad_W, grad_b0 = ops.digitcaps_backward_with_s(u, W, b0, routing_s, grad_v, ctx.iterations, want_b0)
    return grad_u, grad_W, grad_b0 if want_b0 else None, None, None


torch.library.register_autograd("halcaps::digitcaps_with_s", _digitcaps_with_s_backward,
                                setup_context=_digitcaps_with_s_setup)


def _capsconv_setup(ctx, inputs, output):
    input, filter, stride, pad, _ = inputs
    ctx.save_for_backward(input, filter)
    ctx.stride, ctx.pad = stride, pad


def _capsconv_backward(ctx, grad_output):
    input, filter = ctx.saved_tensors
    grad_input, grad_filter = ops.capsconv_backward(input, filter, grad_output, ctx.stride, ctx.pad)
    return grad_input, grad_filter, None, None, None


torch.library.register_autograd("halcaps::capsconv", _capsconv_backward, setup_context=_capsconv_setup)


# ---- functions -------------------------------------------------------------
# They call each operator's .default overload, which skips the overload
# lookup of torch.ops.halcaps.<name>(...).

def predict(u: Tensor, W: Tensor, implementation: str = "") -> Tensor:
    """u_hat[b,i,j,e] = sum_k W[i,j,e,k] u[b,i,k]; u [B,I,K], W [I,J,E,K] -> [B,I,J,E]."""
    return ops.predict.default(u, W, implementation)


def squash(s: Tensor, implementation: str = "") -> Tensor:
    """squash over the last dimension: (|s|^2 / (1 + |s|^2)) s / sqrt(|s|^2 + 1e-9)."""
    return ops.squash.default(s, implementation)


def route(u_hat: Tensor, b0: Optional[Tensor] = None, iterations: int = 3, implementation: str = "") -> Tensor:
    """Dynamic routing of u_hat [B,I,J,E] from logits b0 [I,J] (None: zeros) -> v [B,J,E]."""
    return ops.route.default(u_hat, b0, iterations, implementation)


def digitcaps(u: Tensor, W: Tensor, b0: Optional[Tensor] = None, iterations: int = 3, implementation: str = "",
              save_routing_sums: Optional[bool] = None) -> Tensor:
    """The DigitCaps layer: prediction then routing; u [B,I,K], W [I,J,E,K], b0 [I,J] or None -> v [B,J,E].

    When a gradient will be taken and save_routing_sums is set, runs the
    library's training pair (digitcaps_with_s / digitcaps_backward_with_s):
    the forward keeps every iteration's weighted sums and the backward starts
    from them instead of recomputing them; unset, the plain forward and the
    recomputing backward (digitcaps / digitcaps_backward). None: the pair,
    the faster on CUDA and on the CPU (bench/torch_training_step.py: the
    layer's step 120.7 ms with it against 377.4 without, 2-core CPU)."""
    if save_routing_sums is None:
        save_routing_sums = True
    needs_grad = torch.is_grad_enabled() and (
        u.requires_grad or W.requires_grad or (b0 is not None and b0.requires_grad))
    if save_routing_sums and needs_grad:
        return ops.digitcaps_with_s.default(u, W, b0, iterations, implementation)[0]
    return ops.digitcaps.default(u, W, b0, iterations, implementation)


def capsconv(input: Tensor, filter: Tensor, stride: int = 1, padding: int = 0, implementation: str = "") -> Tensor:
    """Capsule convolution with 4x4 pose matrices: input [n,H,W,ci,4,4], filter [kh,kw,ci,co,4,4]."""
    return ops.capsconv.default(input, filter, stride, padding, implementation)


def implementations():
    """What this build can run: a list of dicts (op, implementation, device, iterations, description)."""
    rows = []
    for line in ops.implementations().splitlines():
        op, implementation, device, iterations, description = line.split("\t", 4)
        rows.append(dict(op=op, implementation=implementation, device=device,
                         iterations=[int(n) for n in iterations.split(",") if n], description=description))
    return rows

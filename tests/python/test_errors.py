"""Bad input raises a Python exception naming the argument and carrying the
library's status name; nothing crashes."""
import re

import pytest
import torch

import halcaps
from conftest import fresh

ops = torch.ops.halcaps
has_cuda = torch.cuda.is_available()
cuda_only = [pytest.mark.cuda, pytest.mark.skipif(not has_cuda, reason="no CUDA device")]


def good_args(op):
    """A valid call of each operator, by argument name."""
    B, I, K, J, E = 2, 3, 5, 4, 7
    u, W, b0, u_hat, v = fresh(B, I, K), fresh(I, J, E, K), fresh(I, J), fresh(B, I, J, E), fresh(B, J, E)
    x, f = fresh(1, 5, 5, 2, 4, 4), fresh(3, 3, 2, 1, 4, 4)
    return {
        "predict": dict(u=u, W=W),
        "predict_backward": dict(g=u_hat, u=u, W=W),
        "squash": dict(s=v),
        "route": dict(u_hat=u_hat, b0=b0, iterations=3),
        "route_backward": dict(u_hat=u_hat, b0=b0, grad_v=v, iterations=3, compute_grad_b0=True),
        "digitcaps": dict(u=u, W=W, b0=b0, iterations=3),
        "digitcaps_with_s": dict(u=u, W=W, b0=b0, iterations=3),
        "digitcaps_backward": dict(u=u, W=W, b0=b0, grad_v=v, iterations=3, compute_grad_b0=True),
        "digitcaps_backward_with_s": dict(u=u, W=W, b0=b0, routing_s=fresh(3, B, J, E), grad_v=v, iterations=3,
                                          compute_grad_b0=True),
        "capsconv": dict(input=x, filter=f, stride=1, pad=0),
        "capsconv_backward": dict(input=x, filter=f, grad_output=fresh(1, 3, 3, 1, 4, 4), stride=1, pad=0),
    }[op]


OPS = ["predict", "predict_backward", "squash", "route", "route_backward", "digitcaps", "digitcaps_with_s",
       "digitcaps_backward", "digitcaps_backward_with_s", "capsconv", "capsconv_backward"]
TENSOR_ARGS = [(op, name) for op in OPS for name, value in good_args(op).items() if isinstance(value, torch.Tensor)]
# The ops with two tensor arguments or more: one of them can be on another device than the rest.
MIXABLE_TENSOR_ARGS = [
    (op, name) for op, name in TENSOR_ARGS if sum(isinstance(v, torch.Tensor) for v in good_args(op).values()) > 1
]


def call(op, args):
    return getattr(ops, op)(**args)


@pytest.mark.parametrize("op", OPS)
def test_good_arguments_run(op):
    call(op, good_args(op))


@pytest.mark.parametrize("op,name", TENSOR_ARGS)
def test_wrong_dtype(op, name):
    args = good_args(op)
    args[name] = args[name].double()
    with pytest.raises(TypeError, match=rf"halcaps\.{op}: {name} must be float32"):
        call(op, args)


@pytest.mark.parametrize("op,name", TENSOR_ARGS)
def test_wrong_rank(op, name):
    args = good_args(op)
    if op == "squash":
        args[name] = torch.tensor(1.0)
    else:
        args[name] = args[name].unsqueeze(0)
    with pytest.raises(ValueError, match=rf"halcaps\.{op}: bad_rank: .*\b{name}\b"):
        call(op, args)


# One extent of each tensor argument that must agree with another's, and the
# names the message may use for the pair.
MISMATCHES = [
    ("predict", "W", 0), ("predict", "W", 3), ("predict_backward", "g", 0), ("predict_backward", "u", 2),
    ("route", "b0", 0), ("route", "b0", 1), ("route_backward", "grad_v", 2), ("route_backward", "b0", 1),
    ("digitcaps", "W", 3), ("digitcaps", "b0", 1), ("digitcaps_with_s", "W", 0),
    ("digitcaps_backward", "grad_v", 1), ("digitcaps_backward_with_s", "routing_s", 1),
    ("capsconv", "filter", 2), ("capsconv_backward", "grad_output", 1), ("capsconv_backward", "grad_output", 3),
]


@pytest.mark.parametrize("op,name,dim", MISMATCHES)
def test_mismatched_extent(op, name, dim):
    args = good_args(op)
    shape = list(args[name].shape)
    shape[dim] += 1
    args[name] = fresh(*shape)
    with pytest.raises(ValueError, match=rf"halcaps\.{op}: extent_mismatch: .*\b{name}\b"):
        call(op, args)


@pytest.mark.parametrize("op", ["predict", "route", "digitcaps", "squash", "capsconv"])
def test_zero_extent(op):
    args = good_args(op)
    first = next(name for name, value in args.items() if isinstance(value, torch.Tensor))
    shape = list(args[first].shape)
    shape[0] = 0
    args[first] = torch.empty(shape)
    with pytest.raises(ValueError, match=rf"halcaps\.{op}: (bad_extent|null_pointer): .*\b{first}\b"):
        call(op, args)


@pytest.mark.parametrize("op", ["route", "digitcaps", "digitcaps_with_s", "route_backward", "digitcaps_backward"])
@pytest.mark.parametrize("iterations", [0, -1, 100])
def test_unsupported_iterations(op, iterations):
    args = good_args(op)
    args["iterations"] = iterations
    with pytest.raises(ValueError, match=rf"halcaps\.{op}: unsupported_iterations: .*iterations"):
        call(op, args)


@pytest.mark.parametrize("stride,pad", [(0, 0), (-1, 0), (1, -1)])
def test_capsconv_bad_parameters(stride, pad):
    for op in ["capsconv", "capsconv_backward"]:
        args = good_args(op)
        args.update(stride=stride, pad=pad)
        with pytest.raises(ValueError, match=rf"halcaps\.{op}: bad_parameter: .*(stride|pad)"):
            call(op, args)


def test_capsconv_filter_larger_than_input():
    with pytest.raises(ValueError, match=r"halcaps\.capsconv: bad_extent: filter"):
        ops.capsconv(fresh(1, 2, 2, 1, 4, 4), fresh(3, 3, 1, 1, 4, 4))


@pytest.mark.parametrize("op", OPS)
def test_unknown_implementation(op):
    args = good_args(op)
    args["implementation"] = "no_such_schedule"
    with pytest.raises(ValueError, match=rf"halcaps\.{op}: unknown_implementation: .*no_such_schedule"):
        call(op, args)


def test_wrong_dtype_through_modules_and_autograd():
    layer = halcaps.nn.DigitCaps(3, 5, 4, 7)
    with pytest.raises(TypeError, match="u must be float32"):
        layer(fresh(2, 3, 5).double())


@pytest.mark.parametrize("op,name", MIXABLE_TENSOR_ARGS)
@pytest.mark.parametrize("where", ["cpu", "cuda"], ids=["on_cpu", "on_cuda"])
def test_mixed_cpu_and_cuda(op, name, where):
    """One argument on the other device than the rest."""
    if not has_cuda:
        pytest.skip("no CUDA device")
    args = good_args(op)
    if where == "cuda":  # one CUDA tensor among CPU ones
        args[name] = args[name].cuda()
    else:  # one CPU tensor among CUDA ones
        args = {k: (v.cuda() if isinstance(v, torch.Tensor) and k != name else v) for k, v in args.items()}
    with pytest.raises(ValueError, match=r"wrong_memory_space: .*is on"):
        call(op, args)


test_mixed_cpu_and_cuda = pytest.mark.cuda(test_mixed_cpu_and_cuda)


def test_messages_name_the_status():
    with pytest.raises(ValueError) as raised:
        ops.predict(fresh(2, 3, 5), fresh(4, 4, 7, 5))
    assert re.search(r"^halcaps\.predict: extent_mismatch: ", str(raised.value), re.M), str(raised.value)

"""torch.ops.halcaps.* against float64 references in plain PyTorch: forward,
gradients (through autograd), b0 given and absent, iterations 1 to 5, stride
and padding, non-contiguous inputs, and torch.library.opcheck at several
shapes. Every test runs on the CPU and, where a CUDA device is present, on it
(marked `cuda`; skipped without one)."""
import pytest
import torch

import halcaps
from conftest import (assert_close, capsconv_ref, digitcaps_ref, f64, fresh, predict_ref, require_built,
                      require_iterations, route_ref, squash_ref)

ops = torch.ops.halcaps
DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.cuda, pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device")])]

# (B, I, K, J, E): ones, odd primes, the MNIST layer's dims at a small in_caps
PREDICT_SHAPES = [(1, 1, 1, 1, 1), (3, 7, 5, 4, 9), (2, 33, 8, 10, 16), (5, 3, 2, 17, 3)]
# (B, I, J, E)
ROUTE_SHAPES = [(1, 1, 1, 1), (3, 7, 4, 9), (2, 37, 10, 16), (4, 5, 3, 1)]
# (n, H, W, ci, co, k, stride, pad)
CONV_SHAPES = [(1, 5, 5, 1, 1, 1, 1, 0), (2, 9, 7, 3, 2, 3, 2, 1), (1, 8, 8, 2, 3, 3, 1, 1), (3, 6, 5, 1, 2, 2, 3, 2),
               (1, 7, 7, 2, 1, 5, 1, 0)]


def grads_of(out, inputs, weight):
    return torch.autograd.grad((out * weight).sum(), [t for t in inputs if t is not None and t.requires_grad])


# ---- forward and gradients against the float64 references --------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", PREDICT_SHAPES)
def test_predict(device, shape):
    B, I, K, J, E = shape
    u, W = fresh(B, I, K, device=device, requires_grad=True), fresh(I, J, E, K, device=device, requires_grad=True)
    out = halcaps.predict(u, W)
    ref = predict_ref(f64(u), f64(W))
    assert_close(out, ref, name="u_hat")
    g = fresh(*out.shape, device=device)
    uu, WW = f64(u), f64(W)
    ref = predict_ref(uu, WW)
    want = torch.autograd.grad((ref * f64(g)).sum(), [uu, WW])
    got = grads_of(out, [u, W], g)
    assert_close(got[0], want[0], name="grad_u")
    assert_close(got[1], want[1], name="grad_W")
    # the backward operator itself
    gu, gW = ops.predict_backward(g, u.detach(), W.detach())
    assert_close(gu, want[0], name="predict_backward grad_u")
    assert_close(gW, want[1], name="predict_backward grad_W")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(1,), (7,), (3, 16), (2, 5, 8), (4, 1, 3, 1)])
def test_squash(device, shape):
    require_built("squash", device)
    s = fresh(*shape, device=device, requires_grad=True)
    out = halcaps.squash(s)
    ss = f64(s)
    ref = squash_ref(ss)
    assert_close(out, ref, name="v")
    g = fresh(*shape, device=device)
    (got,) = grads_of(out, [s], g)
    (want,) = torch.autograd.grad((ref * f64(g)).sum(), [ss])
    assert_close(got, want, name="grad_s")


@pytest.mark.parametrize("device", DEVICES)
def test_squash_of_zero_is_zero(device):
    require_built("squash", device)
    s = torch.zeros(3, 4, device=device, requires_grad=True)
    out = halcaps.squash(s)
    out.sum().backward()
    assert torch.equal(out.detach().cpu(), torch.zeros(3, 4))
    assert torch.isfinite(s.grad).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("iterations", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("with_b0", [False, True])
@pytest.mark.parametrize("shape", ROUTE_SHAPES)
def test_route(device, shape, iterations, with_b0):
    require_iterations("route", device, iterations)
    B, I, J, E = shape
    u_hat = fresh(B, I, J, E, device=device, scale=0.5, requires_grad=True)
    b0 = fresh(I, J, device=device, requires_grad=True) if with_b0 else None
    out = halcaps.route(u_hat, b0, iterations)
    uu, bb = f64(u_hat), f64(b0)
    ref = route_ref(uu, bb, iterations)
    assert_close(out, ref, name="v")
    g = fresh(*out.shape, device=device)
    got = grads_of(out, [u_hat, b0], g)
    want = torch.autograd.grad((ref * f64(g)).sum(), [t for t in (uu, bb) if t is not None])
    for a, e, name in zip(got, want, ["grad_u_hat", "grad_b0"]):
        assert_close(a, e, name=name)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("iterations", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("with_b0", [False, True])
@pytest.mark.parametrize("save_routing_sums", [False, True])
@pytest.mark.parametrize("shape", PREDICT_SHAPES)
def test_digitcaps(device, shape, iterations, with_b0, save_routing_sums):
    op = "digitcaps_with_s" if save_routing_sums else "digitcaps"
    require_iterations(op, device, iterations)
    B, I, K, J, E = shape
    u = fresh(B, I, K, device=device, scale=0.5, requires_grad=True)
    W = fresh(I, J, E, K, device=device, scale=0.5, requires_grad=True)
    b0 = fresh(I, J, device=device, requires_grad=True) if with_b0 else None
    out = halcaps.digitcaps(u, W, b0, iterations, save_routing_sums=save_routing_sums)
    uu, WW, bb = f64(u), f64(W), f64(b0)
    ref = digitcaps_ref(uu, WW, bb, iterations)
    assert_close(out, ref, name="v")
    g = fresh(*out.shape, device=device)
    got = grads_of(out, [u, W, b0], g)
    want = torch.autograd.grad((ref * f64(g)).sum(), [t for t in (uu, WW, bb) if t is not None])
    for a, e, name in zip(got, want, ["grad_u", "grad_W", "grad_b0"]):
        assert_close(a, e, name=name)


@pytest.mark.parametrize("device", DEVICES)
def test_digitcaps_b0_without_grad(device):
    """b0 given but not trained: the gradients of u and W still include its effect."""
    u = fresh(3, 7, 5, device=device, requires_grad=True)
    W = fresh(7, 4, 9, 5, device=device, requires_grad=True)
    b0 = fresh(7, 4, device=device)
    out = halcaps.digitcaps(u, W, b0, 3)
    uu, WW = f64(u), f64(W)
    ref = digitcaps_ref(uu, WW, f64(b0), 3)
    g = fresh(*out.shape, device=device)
    got = grads_of(out, [u, W], g)
    want = torch.autograd.grad((ref * f64(g)).sum(), [uu, WW])
    assert_close(got[0], want[0], name="grad_u")
    assert_close(got[1], want[1], name="grad_W")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", CONV_SHAPES)
def test_capsconv(device, shape):
    n, H, Wd, ci, co, k, stride, pad = shape
    x = fresh(n, H, Wd, ci, 4, 4, device=device, requires_grad=True)
    K = fresh(k, k, ci, co, 4, 4, device=device, requires_grad=True)
    out = halcaps.capsconv(x, K, stride, pad)
    xx, KK = f64(x), f64(K)
    ref = capsconv_ref(xx, KK, stride, pad)
    assert_close(out, ref, name="output")
    g = fresh(*out.shape, device=device)
    got = grads_of(out, [x, K], g)
    want = torch.autograd.grad((ref * f64(g)).sum(), [xx, KK])
    assert_close(got[0], want[0], name="grad_input")
    assert_close(got[1], want[1], name="grad_filter")


@pytest.mark.parametrize("device", DEVICES)
def test_non_contiguous_inputs_are_copied(device):
    u = fresh(5, 3, 7, device=device).transpose(0, 2)  # [7, 3, 5], not contiguous
    W = fresh(3, 4, 9, 10, device=device)[:, :, :, ::2]  # [3, 4, 9, 5], strided
    assert not u.is_contiguous() and not W.is_contiguous()
    assert_close(halcaps.predict(u, W), predict_ref(f64(u), f64(W)), name="u_hat")
    assert_close(halcaps.digitcaps(u, W), digitcaps_ref(f64(u), f64(W), None, 3), name="v")


@pytest.mark.parametrize("device", DEVICES)
def test_named_implementation(device):
    """Every implementation the build lists for predict on this device gives the same result."""
    u, W = fresh(4, 6, 8, device=device), fresh(6, 10, 16, 8, device=device)
    ref = predict_ref(f64(u), f64(W))
    names = [r["implementation"] for r in halcaps.implementations() if r["op"] == "predict" and r["device"] == device]
    assert names, "no predict implementation listed"
    for name in names:
        try:
            out = halcaps.predict(u, W, implementation=name)
        except ValueError as error:  # an implementation may not apply to this shape; it must say so
            assert "unsupported_shape" in str(error) or "misaligned_pointer" in str(error), str(error)
            continue
        assert_close(out, ref, name=f"u_hat ({name})")


# ---- torch.library.opcheck ------------------------------------------------------

def opcheck_cases(device):
    def t(*shape, grad=False):
        return fresh(*shape, device=device, scale=0.5, requires_grad=grad)
    cases = []
    for B, I, K, J, E in [(2, 3, 5, 4, 7), (1, 1, 1, 1, 1), (3, 11, 8, 10, 16)]:
        cases += [
            ("predict", (t(B, I, K, grad=True), t(I, J, E, K, grad=True))),
            ("predict_backward", (t(B, I, J, E), t(B, I, K), t(I, J, E, K))),
            ("route", (t(B, I, J, E, grad=True), t(I, J, grad=True), 3)),
            ("route", (t(B, I, J, E, grad=True), None, 1)),
            ("route_backward", (t(B, I, J, E), t(I, J), t(B, J, E), 3, True)),
            ("route_backward", (t(B, I, J, E), None, t(B, J, E), 1, False)),
            ("digitcaps", (t(B, I, K, grad=True), t(I, J, E, K, grad=True), t(I, J, grad=True), 3)),
            ("digitcaps", (t(B, I, K, grad=True), t(I, J, E, K, grad=True), None, 5)),
            ("digitcaps_with_s", (t(B, I, K, grad=True), t(I, J, E, K, grad=True), t(I, J, grad=True), 3)),
            ("digitcaps_with_s", (t(B, I, K, grad=True), t(I, J, E, K, grad=True), None, 1)),
            ("digitcaps_backward", (t(B, I, K), t(I, J, E, K), t(I, J), t(B, J, E), 3, True)),
            ("digitcaps_backward_with_s", (t(B, I, K), t(I, J, E, K), None, t(3, B, J, E), t(B, J, E), 3, False)),
        ]
    for shape in [(3,), (2, 5, 16), (1, 1)]:
        cases.append(("squash", (t(*shape, grad=True),)))
    for n, H, Wd, ci, co, k, stride, pad in [(1, 5, 5, 2, 1, 3, 1, 0), (2, 7, 6, 1, 2, 3, 2, 1)]:
        cases.append(("capsconv", (t(n, H, Wd, ci, 4, 4, grad=True), t(k, k, ci, co, 4, 4, grad=True), stride, pad)))
        OH, OW = (H + 2 * pad - k) // stride + 1, (Wd + 2 * pad - k) // stride + 1
        cases.append(("capsconv_backward", (t(n, H, Wd, ci, 4, 4), t(k, k, ci, co, 4, 4), t(n, OH, OW, co, 4, 4),
                                            stride, pad)))
    return cases


def opcheck_ids():
    return [f"{name}-{n}" for n, (name, _) in enumerate(opcheck_cases("cpu"))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", range(len(opcheck_ids())), ids=opcheck_ids())
def test_opcheck(device, case):
    name, args = opcheck_cases(device)[case]
    require_built(name, device)
    torch.library.opcheck(getattr(ops, name).default, args)


def test_every_operator_is_opchecked():
    checked = {name for name, _ in opcheck_cases("cpu")}
    registered = {"predict", "predict_backward", "squash", "route", "route_backward", "digitcaps",
                  "digitcaps_with_s", "digitcaps_backward", "digitcaps_backward_with_s", "capsconv",
                  "capsconv_backward"}
    assert registered <= checked


# ---- CUDA: streams and devices ------------------------------------------------

@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("op", ["predict", "digitcaps", "digitcaps_with_s", "route", "capsconv"])
def test_cuda_runs_on_the_current_stream(op):
    """Inputs are written on a side stream behind a long sleep and the operator
    is called on that stream: a kernel queued anywhere else (the legacy stream
    does not wait for PyTorch's non-blocking streams) would read them unwritten."""
    side = torch.cuda.Stream()
    if op == "capsconv":
        sources = [fresh(2, 9, 7, 3, 4, 4, device="cuda"), fresh(3, 3, 3, 2, 4, 4, device="cuda")]
    elif op == "route":
        sources = [fresh(4, 37, 10, 16, device="cuda", scale=0.5)]
    else:
        sources = [fresh(4, 37, 8, device="cuda", scale=0.5), fresh(37, 10, 16, 8, device="cuda", scale=0.5)]
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        inputs = [torch.zeros_like(t) for t in sources]
        torch.cuda._sleep(200_000_000)
        for dst, src in zip(inputs, sources):
            dst.copy_(src)
        if op == "capsconv":
            out = halcaps.capsconv(*inputs, 2, 1)
        elif op == "route":
            out = halcaps.route(inputs[0], None, 3)
        elif op == "digitcaps_with_s":
            out = ops.digitcaps_with_s(inputs[0], inputs[1], None, 3)[0]
        else:
            out = getattr(halcaps, op)(*inputs)
        side.synchronize()
    if op == "capsconv":
        ref = capsconv_ref(f64(sources[0]), f64(sources[1]), 2, 1)
    elif op == "route":
        ref = route_ref(f64(sources[0]), None, 3)
    elif op == "predict":
        ref = predict_ref(f64(sources[0]), f64(sources[1]))
    else:
        ref = digitcaps_ref(f64(sources[0]), f64(sources[1]), None, 3)
    assert_close(out, ref, name=op)


@pytest.mark.cuda
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="fewer than 2 CUDA devices")
def test_cuda_second_device():
    """Tensors on cuda:1 while cuda:0 is the current device: run on cuda:1 (device guard, its context)."""
    u, W = fresh(4, 7, 8, device="cuda:1", requires_grad=True), fresh(7, 10, 16, 8, device="cuda:1", requires_grad=True)
    with torch.cuda.device(0):
        v = halcaps.digitcaps(u, W)
        v.sum().backward()
    assert v.device == torch.device("cuda:1") and u.grad.device == torch.device("cuda:1")
    uu, WW = f64(u), f64(W)
    ref = digitcaps_ref(uu, WW, None, 3)
    assert_close(v, ref, name="v")
    want = torch.autograd.grad(ref.sum(), [uu, WW])
    assert_close(u.grad, want[0], name="grad_u")
    assert_close(W.grad, want[1], name="grad_W")

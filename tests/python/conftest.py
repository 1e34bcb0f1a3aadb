"""Shared pieces of the Python tests: float64 references written in plain
PyTorch (einsum, softmax, the squash, conv2d after permutes), fresh inputs,
the comparison rule of docs/design.md §2, and the iteration counts this build has."""
import pytest
import torch

import halcaps

EPS = 1e-9


def predict_ref(u, W):
    return torch.einsum("bik,ijek->bije", u, W)


def squash_ref(s):
    n2 = (s * s).sum(-1, keepdim=True)
    return n2 / (1 + n2) * s / torch.sqrt(n2 + EPS)


def route_ref(u_hat, b0, iterations):
    B, I, J, E = u_hat.shape
    b = torch.zeros(B, I, J, dtype=u_hat.dtype, device=u_hat.device) if b0 is None else b0.expand(B, I, J)
    for t in range(iterations):
        c = torch.softmax(b, dim=2)
        s = torch.einsum("bij,bije->bje", c, u_hat)
        v = squash_ref(s)
        if t + 1 < iterations:
            b = b + torch.einsum("bije,bje->bij", u_hat, v)
    return v


def digitcaps_ref(u, W, b0, iterations):
    return route_ref(predict_ref(u, W), b0, iterations)


def capsconv_ref(x, K, stride, pad):
    # O_ij = sum_c I_ic K_cj as conv2d: batch n*4 (pose row i), channels ci*4 (c) -> co*4 (j)
    n, H, Wd, ci = x.shape[:4]
    kh, kw, _, co = K.shape[:4]
    x2 = x.permute(0, 4, 3, 5, 1, 2).reshape(n * 4, ci * 4, H, Wd)
    w2 = K.permute(3, 5, 2, 4, 0, 1).reshape(co * 4, ci * 4, kh, kw)
    y = torch.nn.functional.conv2d(x2, w2, stride=stride, padding=pad)
    OH, OW = y.shape[2:]
    return y.reshape(n, 4, co, 4, OH, OW).permute(0, 4, 5, 2, 1, 3).contiguous()


def fresh(*shape, device="cpu", scale=1.0, requires_grad=False):
    t = (torch.randn(*shape, dtype=torch.float32, device=device) * scale)
    return t.requires_grad_(requires_grad)


def f64(t):
    if t is None:
        return None
    return t.detach().to(torch.float64).requires_grad_(t.requires_grad)


def assert_close(actual, expected, rel=1e-4, name="result"):
    """Elementwise |x - ref| <= atol + rtol |ref| with atol scaled by the
    reference's size, and the norm-wise relative error below rel."""
    assert actual.shape == expected.shape, f"{name}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    a = actual.detach().to(torch.float64).cpu()
    e = expected.detach().to(torch.float64).cpu()
    assert torch.isfinite(a).all(), f"{name}: non-finite values"
    scale = e.abs().max().item() if e.numel() else 0.0
    err = (a - e).abs()
    bound = rel * 10 * scale + rel * 10 * e.abs() + 1e-12
    worst = (err - bound).max().item() if e.numel() else -1.0
    norm = e.norm().item()
    relative = (a - e).norm().item() / norm if norm > 0 else (a - e).norm().item()
    assert worst <= 0 and relative <= rel, f"{name}: max excess {worst:.3g}, norm-wise relative error {relative:.3g}"


def built_iterations(op, device):
    counts = set()
    for row in halcaps.implementations():
        if row["op"] == op and row["device"] == device:
            counts.update(row["iterations"])
    return counts


def require_iterations(op, device, iterations):
    """xfail (with the reason) a count this build's library has no kernel for."""
    counts = built_iterations(op, device)
    if counts and iterations not in counts:
        pytest.xfail(f"the library builds {op} on {device} for iterations {sorted(counts)} only, not {iterations}")


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(1234)


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda: needs a CUDA device (skipped without one)")


def built(op, device):
    return any(r["op"] == op and r["device"] == device for r in halcaps.implementations())


def require_built(op, device):
    """xfail (with the reason) an operator this build's library has no kernel of on `device`."""
    if not built(op, device):
        pytest.xfail(f"the library has no {op} kernel for {device}")

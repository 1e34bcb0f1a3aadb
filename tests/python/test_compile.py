"""torch.compile(fullgraph=True) and torch.export of modules using the operators."""
import pytest
import torch

import halcaps
from conftest import assert_close, built, fresh, squash_ref

has_cuda = torch.cuda.is_available()
DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.cuda, pytest.mark.skipif(not has_cuda, reason="no CUDA device")])]


class Capsules(torch.nn.Module):
    def __init__(self, device="cpu"):
        super().__init__()
        # the library's squash where it has a kernel for the device, else the same formula in torch
        self.squash = halcaps.squash if built("squash", device) else squash_ref
        self.conv = halcaps.nn.CapsConv4x4(2, 3, 3, stride=2, padding=1)
        self.prediction = halcaps.nn.CapsulePrediction(3 * 3 * 3, 16, 5, 8)
        self.digit = halcaps.nn.DigitCaps(3 * 3 * 3, 16, 5, 8, iterations=3, learn_logits=True)
        self.route_iterations = 2 if 2 in _route_counts() else 1

    def forward(self, x):
        y = self.conv(x)  # [n, 3, 3, 3, 4, 4]
        u = self.squash(y.reshape(y.shape[0], -1, 16))  # 27 capsules of 16
        u_hat = self.prediction(u)
        v = self.digit(u)
        routed = halcaps.route(u_hat, None, self.route_iterations)
        return v.norm(dim=-1) + routed.norm(dim=-1)


def _route_counts():
    return {n for r in halcaps.implementations() if r["op"] == "route" and r["device"] == "cpu"
            for n in r["iterations"]}


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_matches_eager(device):
    torch._dynamo.reset()
    model = Capsules(device).to(device)
    x = fresh(4, 5, 5, 2, 4, 4, device=device)
    eager = model(x)
    eager.sum().backward()
    eager_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    compiled = torch.compile(model, fullgraph=True)
    out = compiled(x)
    out.sum().backward()
    assert_close(out, eager, rel=1e-5, name="compiled output")
    for p, g in zip(model.parameters(), eager_grads):
        assert_close(p.grad, g, rel=1e-5, name="compiled gradient")


def test_export():
    model = Capsules()
    x = fresh(2, 5, 5, 2, 4, 4)
    exported = torch.export.export(model, (x,))
    targets = {str(node.target) for node in exported.graph.nodes if node.op == "call_function"}
    assert any("halcaps.digitcaps" in t for t in targets), targets
    assert any("halcaps.capsconv" in t for t in targets), targets
    assert_close(exported.module()(x), model(x), rel=1e-6, name="exported output")

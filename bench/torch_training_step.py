#!/usr/bin/env python3
"""The training step of the CapsNet at the MNIST shape (DigitCaps 1152 -> 10
capsules, 8 -> 16 dimensions, 3 iterations, batch 128): halcaps vs the same
model in pure PyTorch eager vs torch.compile of it, on one device; and the
cost of calling an operator from Python over calling the C++ API.

    python bench/torch_training_step.py                      # CPU, 2 threads
    python bench/torch_training_step.py --device cuda --repeats 50
    python bench/torch_training_step.py --only overhead

A step is forward + margin loss + backward + Adam. "layer" times DigitCaps
alone (input u [128, 1152, 8] given, W trained); "model" the whole CapsNet
(conv 9x9 256, primary capsules 9x9/2 32x8, DigitCaps) on random 28x28
images; "parts" the layer's forward and backward apart. Medians of --repeats
runs after warm-up; CPU numbers from a shared machine are noisy: compare only
within one run.
"""
import argparse
import json
import pathlib
import statistics
import sys
import time

import torch
from torch import nn

import halcaps
import halcaps.nn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
from capsnet_digits import TorchDigitCaps, squash  # noqa: E402

ops = torch.ops.halcaps


def median_seconds(step, repeats, warmup, device):
    for _ in range(warmup):
        step()
    times = []
    for _ in range(repeats):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class LayerModel(nn.Module):
    def __init__(self, backend, iterations, save_routing_sums=None):
        super().__init__()
        if backend == "halcaps":
            self.digits = halcaps.nn.DigitCaps(1152, 8, 10, 16, iterations)
        else:
            self.digits = TorchDigitCaps(1152, 8, 10, 16, iterations)
        self.save_routing_sums = save_routing_sums

    def forward(self, u):
        if isinstance(self.digits, halcaps.nn.DigitCaps):
            return halcaps.digitcaps(u, self.digits.weight, None, self.digits.iterations,
                                     save_routing_sums=self.save_routing_sums)
        return self.digits(u)


class MnistCapsNet(nn.Module):
    def __init__(self, backend, iterations):
        super().__init__()
        self.conv = nn.Conv2d(1, 256, 9)
        self.primary = nn.Conv2d(256, 32 * 8, 9, stride=2)
        self.digits = LayerModel(backend, iterations)

    def forward(self, x):
        y = self.primary(torch.relu(self.conv(x)))  # [B, 256, 6, 6]
        B = y.shape[0]
        u = y.reshape(B, 32, 8, 6, 6).permute(0, 1, 3, 4, 2).reshape(B, 1152, 8)
        return self.digits(squash(u))


def training_step(model, inputs, target):
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-4)

    def step():
        loss = halcaps.nn.margin_loss(model(inputs), target)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return step


def variants(make, compile_pure):
    yield "halcaps", make("halcaps")
    yield "pure PyTorch eager", make("torch")
    if compile_pure:
        yield "torch.compile(pure)", torch.compile(make("torch"))


def bench_steps(kind, args, report):
    torch.manual_seed(0)
    B = args.batch
    target = torch.randint(0, 10, (B,), device=args.device)
    if kind == "layer":
        inputs = squash(torch.randn(B, 1152, 8, device=args.device))

        def make(backend):
            torch.manual_seed(0)
            return LayerModel(backend, args.iterations).to(args.device)
    else:
        inputs = torch.rand(B, 1, 28, 28, device=args.device)

        def make(backend):
            torch.manual_seed(0)
            return MnistCapsNet(backend, args.iterations).to(args.device)
    rows = {}
    for name, model in variants(make, not args.no_compile):
        warmup = 3 if "compile" in name else 2
        rows[name] = median_seconds(training_step(model, inputs, target), args.repeats, warmup, args.device)
        report(f"{kind:6s} step  {name:22s} {1e3 * rows[name]:9.2f} ms")
    if kind == "layer":  # the other of the library's two training paths (the default keeps s)
        model = LayerModel("halcaps", args.iterations, save_routing_sums=False).to(args.device)
        name = "halcaps (recompute s)"
        rows[name] = median_seconds(training_step(model, inputs, target), args.repeats, 2, args.device)
        report(f"{kind:6s} step  {name:22s} {1e3 * rows[name]:9.2f} ms")
    base = rows["halcaps"]
    for name, seconds in rows.items():
        if name != "halcaps":
            report(f"{kind:6s} ratio {name:22s} / halcaps = {seconds / base:6.2f}x")
    return rows


def bench_parts(args, report):
    """Where the layer's step goes: the forward and backward operators alone."""
    torch.manual_seed(0)
    B, r = args.batch, args.iterations
    u = squash(torch.randn(B, 1152, 8, device=args.device))
    W = halcaps.nn.glorot_uniform_(torch.empty(1152, 10, 16, 8, device=args.device), 8, 16)
    grad_v = torch.randn(B, 10, 16, device=args.device)
    v, routing_s = ops.digitcaps_with_s(u, W, None, r)
    parts = {
        "halcaps digitcaps (forward)": lambda: ops.digitcaps(u, W, None, r),
        "halcaps digitcaps_with_s (forward)": lambda: ops.digitcaps_with_s(u, W, None, r),
        "halcaps digitcaps_backward_with_s": lambda: ops.digitcaps_backward_with_s(u, W, None, routing_s, grad_v, r),
        "halcaps digitcaps_backward": lambda: ops.digitcaps_backward(u, W, None, grad_v, r),
    }
    pure = TorchDigitCaps(1152, 8, 10, 16, r).to(args.device)
    pure.weight.data.copy_(W)
    parts["pure PyTorch forward"] = lambda: pure(u)

    def pure_forward_backward():
        out = pure(u)
        out.backward(grad_v)
    parts["pure PyTorch forward + backward"] = pure_forward_backward
    rows = {}
    for name, call in parts.items():
        with torch.no_grad() if "pure PyTorch forward" == name else torch.enable_grad():
            rows[name] = median_seconds(call, args.repeats, 2, args.device)
        report(f"parts  {name:38s} {1e3 * rows[name]:9.2f} ms")
    return rows


def bench_overhead(args, report):
    """Per-call cost on a tiny shape (one capsule, one dimension): the Python operator vs the C++ API."""
    u = torch.randn(1, 1, 1, device=args.device)
    W = torch.randn(1, 1, 1, 1, device=args.device)
    calls = 20000 if args.device == "cpu" else 5000
    rows = {}
    for name, call in [("torch.ops.halcaps.predict", lambda: ops.predict(u, W)),
                       ("halcaps.predict", lambda: halcaps.predict(u, W))]:
        for _ in range(200):
            call()
        samples = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(calls):
                call()
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            samples.append((time.perf_counter() - start) / calls * 1e6)
        rows[name] = statistics.median(samples)
    rows["C++ API halcaps::predict"] = statistics.median(ops.cpp_predict_call_us(u, W, calls) for _ in range(5))
    for name, us in rows.items():
        report(f"call   {name:28s} {us:8.2f} us")
    overhead = rows["torch.ops.halcaps.predict"] - rows["C++ API halcaps::predict"]
    report(f"call   Python operator overhead over the C++ API: {overhead:.2f} us a call (goal <= 20 us)")
    rows["overhead"] = overhead
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--only", choices=["layer", "model", "parts", "overhead"], action="append")
    parser.add_argument("--no-compile", action="store_true", help="leave out torch.compile (slow to build)")
    parser.add_argument("--json", help="write the numbers to this file")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device_name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU"
    print(f"torch {torch.__version__}, {device_name}, {torch.get_num_threads()} torch threads, batch {args.batch}, "
          f"{args.iterations} iterations, median of {args.repeats}")
    out = dict(torch=torch.__version__, device=device_name, threads=args.threads, batch=args.batch)
    for kind in args.only or ["overhead", "parts", "layer", "model"]:
        if kind in ("layer", "model"):
            out[kind] = bench_steps(kind, args, print)
        elif kind == "parts":
            out[kind] = bench_parts(args, print)
        else:
            out[kind] = bench_overhead(args, print)
        sys.stdout.flush()
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PyTorch peers of the DigitCaps layer forward: eager and torch.compile.

The same math as halcaps' digitcaps (docs/design.md §1.2): u_hat = W·u, then
`iterations` rounds of softmax over out_caps, weighted sum over in_caps,
squash, agreement. fp32, TF32 off. Timed as `halcaps bench` times (CUDA
events; "us" with the stream kept busy so the launch path is hidden,
"call_us" on an idle stream): medians of --repeats calls after --warmup
calls; the compile time of torch.compile is reported separately. Prints one JSON object per (implementation, shape).

With --backward it also times the layer's gradients grad_u and grad_W from
u, W and grad_v (operator "digitcaps_backward"): the forward and
torch.autograd.grad together, since halcaps' digitcaps_backward starts from
u and W too (it replays the forward itself); torch.compile compiles both
graphs (AOTAutograd).

    python3 bench/pytorch_digitcaps.py --shapes 128 512 --repeats 30 --backward
"""
import argparse
import json
import statistics
import sys
import time


def digitcaps(u, W, b0, iterations):
    # u [B, I, K], W [I, J, E, K], b0 [I, J] -> v [B, J, E]
    import torch

    u_hat = torch.einsum("ijek,bik->bije", W, u)
    logits = b0.unsqueeze(0).expand(u.shape[0], -1, -1)
    v = None
    for it in range(iterations):
        c = torch.softmax(logits, dim=2)
        s = torch.einsum("bij,bije->bje", c, u_hat)
        norm2 = (s * s).sum(dim=2, keepdim=True)
        v = norm2 / (1.0 + norm2) * s / torch.sqrt(norm2 + 1e-9)
        if it + 1 < iterations:
            logits = logits + torch.einsum("bije,bje->bij", u_hat, v)
    return v


def time_calls(fn, warmup, repeats):
    """Medians in µs, as halcaps bench times (cli/common.h, Timing): device
    time, with the stream kept busy (torch.cuda._sleep) while fn is enqueued
    so the host's launch path is hidden, and call time on an idle stream.
    Returns (device_us, call_us, host_bound)."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    device_times, call_times = [], []
    sleep_cycles, longest_cycles, host_bound = 1 << 19, 1 << 25, False  # ~0.3 ms up, at ~1.8 GHz
    for _ in range(repeats):
        while True:
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(sleep_cycles)
            start.record()
            fn()
            start_done = start.query()  # the device waited for the host: the interval holds host time
            stop.record()
            stop.synchronize()
            if not start_done or sleep_cycles >= longest_cycles:
                host_bound = host_bound or start_done
                device_times.append(start.elapsed_time(stop) * 1000.0)
                break
            sleep_cycles *= 4
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        call_times.append(start.elapsed_time(stop) * 1000.0)
    return statistics.median(device_times), statistics.median(call_times), host_bound


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", type=int, nargs="+", default=[128, 512], help="batch sizes (MNIST I=1152 K=8 J=10 E=16)")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--backward", action="store_true", help="also time the gradients (forward + backward)")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("pytorch_digitcaps.py: error: PyTorch is not installed", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("pytorch_digitcaps.py: error: no CUDA device", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda")
    compiled = torch.compile(digitcaps)
    for batch in args.shapes:
        I, K, J, E = 1152, 8, 10, 16
        gen = torch.Generator(device=device).manual_seed(batch)
        u = torch.randn(batch, I, K, device=device, generator=gen)
        W = torch.randn(I, J, E, K, device=device, generator=gen)
        b0 = torch.zeros(I, J, device=device)
        t0 = time.perf_counter()
        v_compiled = compiled(u, W, b0, args.iterations)
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - t0
        v_eager = digitcaps(u, W, b0, args.iterations)
        agree = (v_compiled - v_eager).abs().max().item()
        torch.cuda.reset_peak_memory_stats()
        eager_us, eager_call_us, eager_host_bound = time_calls(
            lambda: digitcaps(u, W, b0, args.iterations), args.warmup, args.repeats)
        eager_peak = torch.cuda.max_memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        compiled_us, compiled_call_us, compiled_host_bound = time_calls(
            lambda: compiled(u, W, b0, args.iterations), args.warmup, args.repeats)
        compiled_peak = torch.cuda.max_memory_allocated()
        common = {"operator": "digitcaps", "B": batch, "I": I, "K": K, "J": J, "E": E,
                  "iterations": args.iterations, "device": torch.cuda.get_device_name()}
        print(json.dumps({**common, "implementation": "pytorch_eager", "us": round(eager_us, 1),
                          "call_us": round(eager_call_us, 1), "host_bound": eager_host_bound,
                          "peak_bytes": eager_peak}))
        print(json.dumps({**common, "implementation": "torch_compile", "us": round(compiled_us, 1),
                          "call_us": round(compiled_call_us, 1), "host_bound": compiled_host_bound,
                          "peak_bytes": compiled_peak, "compile_s": round(compile_s, 1),
                          "max_abs_diff_vs_eager": agree}))
        if args.backward:
            time_gradients(compiled, u, W, b0, args, {**common, "operator": "digitcaps_backward"})
    return 0


def time_gradients(compiled, u, W, b0, args, common):
    """Prints the eager and compiled rows of the layer's gradients, each the
    forward and torch.autograd.grad of (grad_u, grad_W)."""
    import torch

    u = u.detach().requires_grad_(True)
    W = W.detach().requires_grad_(True)
    grad_v = torch.randn(u.shape[0], W.shape[1], W.shape[2], device=u.device)

    def gradients(fn):
        return torch.autograd.grad(fn(u, W, b0, args.iterations), (u, W), grad_v)

    t0 = time.perf_counter()
    gu_compiled, gW_compiled = gradients(compiled)
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    gu_eager, gW_eager = gradients(digitcaps)
    agree = max((gu_compiled - gu_eager).abs().max().item(), (gW_compiled - gW_eager).abs().max().item())
    for name, fn, extra in (("pytorch_eager", digitcaps, {}),
                            ("torch_compile", compiled, {"compile_s": round(compile_s, 1),
                                                         "max_abs_diff_vs_eager": agree})):
        torch.cuda.reset_peak_memory_stats()
        us, call_us, host_bound = time_calls(lambda: gradients(fn), args.warmup, args.repeats)
        print(json.dumps({**common, "implementation": name, "us": round(us, 1), "call_us": round(call_us, 1),
                          "host_bound": host_bound, "peak_bytes": torch.cuda.max_memory_allocated(), **extra}))


if __name__ == "__main__":
    sys.exit(main())

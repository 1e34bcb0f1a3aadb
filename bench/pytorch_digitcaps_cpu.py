#!/usr/bin/env python3
"""PyTorch CPU peers of the DigitCaps layer: forward, and forward + backward
(grad_u and grad_W from grad_v), each eager and under torch.compile, all in
one run so that their ratios come from one machine state.

The math is bench/pytorch_digitcaps.py's `digitcaps` (docs/design.md §1.2).
fp32, torch.set_num_threads(--threads) (2: the build machine's cores, as
`halcaps bench --device cpu` uses them). Timed as `halcaps bench` times the
CPU (docs/design.md §3): the host clock around a call, the median of
--repeats calls after --warmup calls; torch.compile's first call (the
compile) is reported apart as compile_s. Prints one JSON object a row:
operator digitcaps (forward) or digitcaps_train (forward + autograd.grad),
implementation pytorch_eager or torch_compile, with the median, the
quartiles and the process's user CPU time per call.

    python3 bench/pytorch_digitcaps_cpu.py --shapes 128 --threads 2 --repeats 9

Needs only a Python with torch (it is not part of halcaps' requirements).
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_digitcaps import digitcaps  # noqa: E402  (the layer's math, shared with the CUDA peer)


def time_calls(fn, warmup, repeats):
    """Per-call host times in µs (sorted) and the mean user CPU µs per call."""
    for _ in range(warmup):
        fn()
    times = []
    cpu0 = resource.getrusage(resource.RUSAGE_SELF).ru_utime
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    cpu_us = (resource.getrusage(resource.RUSAGE_SELF).ru_utime - cpu0) * 1e6 / repeats
    return sorted(times), cpu_us


def row(common, implementation, times, cpu_us, **extra):
    q = statistics.quantiles(times, n=4) if len(times) > 1 else [times[0]] * 3
    return json.dumps({**common, "implementation": implementation, "us": round(statistics.median(times), 1),
                       "q1_us": round(q[0], 1), "q3_us": round(q[2], 1), "user_cpu_us": round(cpu_us, 1),
                       "repeats": len(times), **extra})


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", type=int, nargs="+", default=[128], help="batch sizes (MNIST I=1152 K=8 J=10 E=16)")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--no-compile", action="store_true", help="eager rows only")
    args = parser.parse_args()
    if args.repeats < 1 or args.warmup < 0 or args.threads < 1 or args.iterations < 1:
        parser.error("--repeats, --threads and --iterations must be at least 1, --warmup at least 0")
    try:
        import torch
    except ImportError:
        print("pytorch_digitcaps_cpu.py: error: PyTorch is not installed in " + sys.executable, file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    compiled = None if args.no_compile else torch.compile(digitcaps)
    for batch in args.shapes:
        I, K, J, E = 1152, 8, 10, 16
        gen = torch.Generator().manual_seed(batch)
        u = torch.randn(batch, I, K, generator=gen)
        W = torch.randn(I, J, E, K, generator=gen)
        b0 = torch.zeros(I, J)
        grad_v = torch.randn(batch, J, E, generator=gen)
        ug, Wg = u.clone().requires_grad_(True), W.clone().requires_grad_(True)
        common = {"B": batch, "I": I, "K": K, "J": J, "E": E, "iterations": args.iterations,
                  "device": "cpu", "threads": torch.get_num_threads(), "torch": torch.__version__}

        def forward(fn):
            with torch.no_grad():
                return fn(u, W, b0, args.iterations)

        def train(fn):
            return torch.autograd.grad(fn(ug, Wg, b0, args.iterations), (ug, Wg), grad_v)

        impls = [("pytorch_eager", digitcaps)] + ([] if compiled is None else [("torch_compile", compiled)])
        for op, step in (("digitcaps", forward), ("digitcaps_train", train)):
            extra_of = {}
            if compiled is not None:
                t0 = time.perf_counter()
                out_compiled = step(compiled)
                compile_s = time.perf_counter() - t0
                out_eager = step(digitcaps)
                pairs = zip(out_compiled, out_eager) if isinstance(out_eager, tuple) else [(out_compiled, out_eager)]
                diff = max((a - b).abs().max().item() for a, b in pairs)
                extra_of["torch_compile"] = {"compile_s": round(compile_s, 1), "max_abs_diff_vs_eager": diff}
            for name, fn in impls:
                times, cpu_us = time_calls(lambda: step(fn), args.warmup, args.repeats)
                print(row({**common, "operator": op}, name, times, cpu_us, **extra_of.get(name, {})), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

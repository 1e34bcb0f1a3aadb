#!/usr/bin/env python3
"""Barham & Isard's table, redone: compile (or search) time and run time of
every way of getting an operator, from `halcaps bench` and `halcaps explore`.

    python3 bench/barham_isard_table.py --bench BENCH.json [--bench-1thread B1.json] \\
        [--explore DIR ...] [--compile-times TIMES.json] [--shape mnist_b128] -o TABLE.md

Barham & Isard ("Machine learning systems are stuck in a rut", 2019, table 1)
compared, for one capsule-convolution kernel, the compile time and the run
time of gcc, gcc -fopenmp, PlaidML, Tensor Comprehensions at three
autotuning budgets and hand-written CUDA. Here, per operator (capsule
prediction forward, its backward, the DigitCaps layer, the capsule
convolution, as far as the inputs hold them), the rows are:

  naive loops, 1 thread   bench's naive-openmp rows from a run under
                          OMP_NUM_THREADS=1 (--bench-1thread): B&I's "gcc"
  naive loops, OpenMP     naive-openmp: B&I's "gcc -fopenmp"
  naive CUDA              cuda_blog_naive: the seed blog's kernels;
                          cuda_vaidya_b: Vaidya's baseline B
  eager framework         stage_per_op / stage_per_kernel / cuda_naive
                          (one loop nest or kernel per step)
  naive Halide schedule   naive: one GPU thread per output
  autoscheduler           auto_adams2019, auto_mullapudi2016, auto_li2018,
                          auto_anderson2021: B&I's PlaidML / TC rows
  explored best           the best valid point of `halcaps explore run`;
                          its compile column also gives the whole search
  hand-tuned Halide       the named schedules (cpu, tuned, ...)
  hand-written CUDA       cuda_* (the blog's naive kernels included)
  vendor library          cublas*, cudnn, im2col_cublas

Run times are bench's (median, inputs rotated past the cache) whenever bench
has a row of that name; an explored point that bench did not run shows
explore's own time, marked. Compile times are `halcaps explore build`'s
(one generator run for the host target, wall clock, with CPU time in
brackets): rows built with `--autoscheduler` and `--schedule`, and the
space's points. predict_backward sums its two generators. Times of the C++
and CUDA files come from --compile-times ({"naive-openmp": s, ...}); the
rest show "-". Needs the standard library only; bad input ends with a
one-line error and exit code 2.
"""

import argparse
import json
import math
import os
import sys

# bench operator -> the generators whose compile times add up to it
GENERATORS = {
    "predict": ["predict"],
    "predict_backward": ["predict_grad_input", "predict_grad_weight"],
    "digitcaps": ["digitcaps"],  # digitcaps_fused's rows count as digitcaps (ALIASES)
    "capsconv": ["capsconv"],
}
# Generators whose rows are implementations of another's bench operator: the
# fused DigitCaps layer (its space and named points) is `digitcaps` in bench.
ALIASES = {"digitcaps_fused": "digitcaps"}
TITLES = {
    "predict": "Capsule prediction, forward",
    "predict_backward": "Capsule prediction, both gradients (grad_u + grad_W)",
    "digitcaps": "DigitCaps layer, forward, 3 routing iterations",
    "capsconv": "Capsule convolution, 4x4 poses, forward",
}
CATEGORY_ORDER = [
    "naive loops, 1 thread",
    "naive loops, OpenMP",
    "naive CUDA",
    "eager framework",
    "naive Halide schedule",
    "autoscheduler",
    "explored best",
    "hand-tuned Halide",
    "hand-written CUDA",
    "vendor library",
]


def fail(message):
    print(f"barham_isard_table.py: error: {message}", file=sys.stderr)
    sys.exit(2)


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")


def category(implementation):
    if implementation == "naive-openmp":
        return "naive loops, OpenMP"
    if implementation in ("stage_per_op", "stage_per_kernel", "cuda_naive"):
        return "eager framework"
    if implementation in ("cuda_blog_naive", "cuda_vaidya_b"):
        return "naive CUDA"
    if implementation == "naive":
        return "naive Halide schedule"
    if implementation.startswith("auto_"):
        return "autoscheduler"
    if implementation.startswith("space:"):
        return "explored best"
    if implementation.startswith(("cublas", "cudnn", "im2col_cublas")):
        return "vendor library"
    if implementation.startswith("cuda_"):
        return "hand-written CUDA"
    return "hand-tuned Halide"


def finite(x):
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def fmt_us(us):
    if not finite(us):
        return "-"
    if us >= 10000:
        return f"{us / 1000:.1f} ms"
    if us >= 100:
        return f"{us:.0f} µs"
    return f"{us:.1f} µs"


def fmt_s(s, cpu=None):
    if not finite(s):
        return "-"
    text = f"{s:.1f} s" if s >= 1 else f"{s:.2f} s"
    if finite(cpu):
        text += f" ({cpu:.1f} s CPU)"
    return text


class Explore:
    """Every `halcaps explore` directory given: compile times by (generator,
    row name), run results by generator."""

    def __init__(self, dirs):
        self.compiled = {}  # (generator, name) -> (wall s, cpu s)
        self.failed = {}  # (generator, name) -> (wall s, error) of rows that did not compile
        self.spaces = {}  # generator -> list of point entries (space points only)
        self.results = {}  # generator -> the results.json data of its directories
        self.sources = []
        for d in dirs:
            points_path = os.path.join(d, "points.json")
            if not os.path.exists(points_path):
                fail(f"{d}: no points.json (run `halcaps explore build --out {d}` first)")
            data = load_json(points_path)
            try:
                op, device = ALIASES.get(data["operator"], data["operator"]), data["device"]
                for p in data["points"]:
                    if p["ok"]:
                        self.compiled[(op, p["point"])] = (p["compile_s"], p.get("compile_cpu_s"))
                    elif not p["point"].startswith("space:"):
                        self.failed[(op, p["point"])] = (p["compile_s"], p.get("error", ""))
                    if p["point"].startswith("space:"):
                        self.spaces.setdefault(op, []).append(p)
            except (KeyError, TypeError) as e:
                fail(f"{points_path}: not a `halcaps explore build` points.json ({e})")
            self.sources.append(f"{d} ({op}, {device}, target {data.get('target', '?')})")
            results_path = os.path.join(d, "results.json")
            if os.path.exists(results_path):
                self.results.setdefault(op, []).append(load_json(results_path))

    def compile_time(self, op, name):
        """(wall, cpu) summed over the operator's generators; None if any is missing."""
        wall = cpu = 0.0
        for g in GENERATORS[op]:
            t = self.compiled.get((g, name))
            if t is None:
                return None
            wall += t[0]
            cpu = cpu + t[1] if finite(t[1]) and finite(cpu) else None
        return wall, cpu

    def explore_only_rows(self, op, shape):
        """Rows explore ran (autoschedulers, named schedules) at `shape`:
        name -> us summed over the operator's generators (predict_backward:
        grad_u + grad_W), None when one of them was not valid."""
        per_generator = []
        for g in GENERATORS[op]:
            rows = {}
            for res in self.results.get(g, []):
                if res.get("shape", {}).get("name") != shape:
                    continue
                rows.update({p["point"]: (p["us"] if p["valid"] and finite(p["us"]) else None)
                             for p in res["points"] if not p["point"].startswith("space:")})
            per_generator.append(rows)
        names = set.intersection(*(set(r) for r in per_generator)) if per_generator else set()
        out = {}
        for name in names:
            times = [r[name] for r in per_generator]
            out[name] = sum(times) if all(t is not None for t in times) else None
        return out

    def built_rows(self, op):
        """Rows (not space points) compiled for every generator of the operator."""
        names = None
        for g in GENERATORS[op]:
            here = {n for (gen, n) in self.compiled if gen == g and not n.startswith("space:")}
            names = here if names is None else names & here
        return names or set()

    def best(self, op):
        """The best valid space point of each of the operator's generators
        (summed for predict_backward), with the whole search's compile time:
        (name, us, search wall s, points, shape); None without results."""
        names, total, search, count, shape = [], 0.0, 0.0, 0, None
        for g in GENERATORS[op]:
            valid = [(p, res.get("shape", {}).get("name")) for res in self.results.get(g, []) for p in res["points"]
                     if p["valid"] and p["point"].startswith("space:") and finite(p["us"])]
            if not valid:
                return None
            best, shape = min(valid, key=lambda v: v[0]["us"])
            names.append(best["point"])
            total += best["us"]
            search += sum(p["compile_s"] for p in self.spaces.get(g, []))
            count += len(self.spaces.get(g, []))
        return " + ".join(names), total, search, count, shape


def bench_rows(paths):
    rows, meta = [], []
    for path in paths:
        data = load_json(path)
        try:
            for r in data["rows"]:
                r["_device"] = data["device"]
                rows.append(r)
        except (KeyError, TypeError) as e:
            fail(f"{path}: not a `halcaps bench --json` file ({e})")
        meta.append(data)
    return rows, meta


def table(op, shape, rows, rows_1thread, explore, compile_times, out):
    here = [r for r in rows if r["operator"] == op and r["shape"] == shape]
    if not here:
        return False
    by_name = {r["implementation"]: r for r in here}
    # The speed-up column's baseline: the naive loops (CPU) or the blog's
    # kernels (GPU); for the layer, the one-step-at-a-time version.
    base_name = next((n for n in ("naive-openmp", "cuda_blog_naive", "cuda_naive", "cuda_vaidya_b", "stage_per_op")
                      if n in by_name), None)
    naive = by_name.get(base_name)
    entries = []  # (category, label, compile text, run us, note)
    for r in rows_1thread:
        if r["operator"] == op and r["shape"] == shape and r["implementation"] == "naive-openmp":
            entries.append(("naive loops, 1 thread", "naive-openmp, OMP_NUM_THREADS=1",
                            fmt_s(compile_times.get("naive-openmp")), r["us"] if r["valid"] else None, ""))
    best = explore.best(op)
    for r in here:
        name = r["implementation"]
        cat = category(name)
        t = explore.compile_time(op, name)
        if t is not None:
            compile_text = fmt_s(*t)
        else:
            compile_text = fmt_s(compile_times.get(name))
        note = "" if r["valid"] else "WRONG"
        if best and name == best[0]:
            cat = "explored best"
            compile_text += f"; search: {best[2]:.0f} s compiling {best[3]} points"
        elif cat == "explored best":
            cat = "hand-tuned Halide"  # a built point that is not this search's best
        entries.append((cat, name, compile_text, r["us"] if r["valid"] else None, note))
    # Rows explore compiled (and maybe ran) that bench did not run, e.g. an
    # autoscheduler whose kernel the build left out (HALCAPS_BEAM_SEARCH_KERNELS=OFF).
    ran = explore.explore_only_rows(op, shape)
    for name in sorted(explore.built_rows(op) - set(by_name)):
        t = explore.compile_time(op, name)
        if name in ran:
            entries.append((category(name), name, fmt_s(*t) if t else "-", ran[name],
                            "explore's timing, not bench's" if ran[name] is not None else "not valid in explore (its results.json check says why)"))
        else:
            entries.append((category(name), name, fmt_s(*t) if t else "-", None, "compiled only: not in this bench run"))
    # Rows whose generator run failed (an autoscheduler out of memory, ...).
    for (gen, name), (wall, error) in sorted(explore.failed.items()):
        if gen in GENERATORS[op] and name not in by_name:
            entries.append((category(name), name, f"failed after {fmt_s(wall)}", None,
                            (error or "compile failed") + " (see the README)"))
    if best and best[0] not in by_name:
        t = explore.compile_time(op, best[0])
        entries.append(("explored best", best[0], (fmt_s(*t) if t else "-") +
                        f"; search: {best[2]:.0f} s compiling {best[3]} points",
                        best[1], f"explore's timing ({best[4]}), not bench's"))
    entries.sort(key=lambda e: (CATEGORY_ORDER.index(e[0]), e[1]))

    out.append(f"### {TITLES.get(op, op)} — {shape}\n")
    out.append(f"| row | implementation | compile (search) time | run time | × vs `{base_name}` | note |")
    out.append("|---|---|---|---|---|---|")
    for cat, name, compile_text, us, note in entries:
        speedup = f"{naive['us'] / us:.1f}×" if naive and naive["valid"] and finite(us) else "-"
        out.append(f"| {cat} | `{name}` | {compile_text} | {fmt_us(us)} | {speedup} | {note} |")
    out.append("")
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", action="append", required=True, help="`halcaps bench --json` output")
    parser.add_argument("--bench-1thread", action="append", default=[],
                        help="bench JSON run under OMP_NUM_THREADS=1 (its naive-openmp rows)")
    parser.add_argument("--explore", action="append", default=[], help="`halcaps explore` work directory")
    parser.add_argument("--compile-times", help='JSON {"implementation": seconds} for C++/CUDA files')
    parser.add_argument("--shape", action="append", help="bench shapes to tabulate (default: mnist_b128, layer, seed)")
    parser.add_argument("--title", default="", help="a line under the heading (machine, date)")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()

    rows, meta = bench_rows(args.bench)
    rows_1thread, meta_1thread = bench_rows(args.bench_1thread)
    explore = Explore(args.explore)
    compile_times = load_json(args.compile_times) if args.compile_times else {}
    shapes = args.shape or ["mnist_b128", "layer", "seed"]

    out = [f"# Compile time and run time, after Barham & Isard's table 1 — {meta[0].get('device', '?')}", ""]
    if args.title:
        out += [args.title, ""]
    out.append("Produced by `bench/barham_isard_table.py` from:")
    out.append("")
    for m in meta + meta_1thread:
        out.append(f"- `{m.get('command', '?')}` ({m.get('date', '?')}, {m.get('device', '?')})")
    for s in explore.sources:
        out.append(f"- explore: `{s}`")
    out.append("")
    out.append("Run time: `halcaps bench` median (inputs rotated past the cache). Compile time: one generator "
               "run for one target as `halcaps explore build` measured it, wall clock (CPU time in brackets); "
               "an autoscheduler's search is part of it. The AOT libraries carry three x86 ISA levels, so the "
               "build compiles CPU kernels three times.")
    out.append("")
    done = 0
    for op in ["predict", "predict_backward", "digitcaps", "capsconv"]:
        for shape in shapes:
            done += table(op, shape, rows, rows_1thread, explore, compile_times, out)
    if not done:
        fail(f"no bench rows for shapes {', '.join(shapes)}")
    with open(args.output, "w") as f:
        f.write("\n".join(out))
    print(f"wrote {args.output} ({done} tables)")


if __name__ == "__main__":
    main()

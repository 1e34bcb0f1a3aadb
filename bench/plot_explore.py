#!/usr/bin/env python3
"""Draw the results.json written by `halcaps explore run`.

    python3 bench/plot_explore.py RESULTS.json -o OUT.png

One subplot per knob (run time against the knob's value, every point a dot,
the best point ringed) and a last one with run time against compile time.
Invalid points (wrong results or failed compiles) have no run time and are
left out; the title says how many. The format (PNG or SVG) follows the
extension of the -o file. Needs matplotlib and the standard library only;
bad input ends with a one-line error and exit code 2.
"""

import argparse
import json
import math
import os
import sys

FORMATS = {".png": "png", ".svg": "svg"}


def fail(message):
    print(f"plot_explore.py: error: {message}", file=sys.stderr)
    sys.exit(2)


def load(path):
    try:
        with open(path) as f:
            data = json.load(f)
        points = data["points"]
        for p in points:
            p["knobs"], p["us"], p["compile_s"], p["valid"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(f"{path}: not a `halcaps explore run` results.json ({e})")
    return data


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    fmt = FORMATS.get(os.path.splitext(args.output)[1].lower())
    if fmt is None:
        fail(f"-o {args.output}: use a .png or .svg file name")
    data = load(args.results)

    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    valid = [p for p in data["points"] if p["valid"] and p["us"] is not None and math.isfinite(p["us"])]
    if not valid:
        fail(f"{args.results}: no valid point to draw")
    best = min(valid, key=lambda p: p["us"])
    # Rows that are not points of the space (autoschedulers, named
    # schedules: `explore build --autoscheduler/--schedule`) have no knobs:
    # they appear in the compile-time panel only, labelled.
    points = [p for p in valid if p["knobs"]]
    knobs = list(points[0]["knobs"].keys()) if points else []
    times = [p["us"] for p in valid]
    # Spaces hold points tens of times slower than the best: a log scale
    # keeps the good ones apart.
    log_scale = max(times) > 10 * min(times)
    fig, axes = plt.subplots(1, len(knobs) + 1, figsize=(3.2 * (len(knobs) + 1), 3.4), squeeze=False)
    axes = axes[0]
    for ax, knob in zip(axes, knobs):
        values = sorted({p["knobs"][knob] for p in points})
        # Knob values as categories: tile sizes are powers of two, flags 0/1.
        index = {v: n for n, v in enumerate(values)}
        ax.scatter([index[p["knobs"][knob]] for p in points], [p["us"] for p in points], s=18, alpha=0.7)
        if best["knobs"]:
            ax.scatter([index[best["knobs"][knob]]], [best["us"]], s=90, facecolors="none", edgecolors="red")
        ax.set_xticks(range(len(values)))
        ax.set_xticklabels([str(v) for v in values])
        ax.set_xlabel(knob)
        ax.set_ylabel("µs per call")
    ax = axes[-1]
    ax.scatter([p["compile_s"] for p in valid], [p["us"] for p in valid], s=18, alpha=0.7)
    ax.scatter([best["compile_s"]], [best["us"]], s=90, facecolors="none", edgecolors="red")
    for p in valid:
        if not p["knobs"]:
            ax.annotate(p["point"], (p["compile_s"], p["us"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("compile time, s")
    ax.set_ylabel("µs per call")
    if log_scale:
        for a in axes:
            a.set_yscale("log")
    shape = data.get("shape", {}).get("name", "?")
    dropped = len(data["points"]) - len(valid)
    fig.suptitle(f"{data.get('operator', '?')} on {data.get('device', '?')}, {shape}: {len(valid)} valid points"
                 f"{f', {dropped} invalid' if dropped else ''}; best {best['point']} {best['us']:.1f} µs",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(args.output, format=fmt, dpi=120)


if __name__ == "__main__":
    main()

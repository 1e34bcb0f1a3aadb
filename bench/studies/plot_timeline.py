#!/usr/bin/env python3
"""Draw the block records of bench/studies/digitcaps_timeline.cu (its --csv output) as
a timeline: one row per SM, each block a bar from its entry to its end,
coloured by what it was doing.

    python3 bench/studies/plot_timeline.py TIMELINE_b128.csv -o timeline_b128.png

Pass blocks take the lower half of their SM's row, squash blocks the upper
half. A pass block's bar is grey while it waits for the kernel ahead, orange
while its first step's copies land, blue through its steps and red while it
adds and writes its partial sums; a squash block's is grey while it waits,
green while it adds the partial sums and red while it squashes and writes.
Needs matplotlib and the standard library only. A missing or malformed file
ends with a one-line error and exit code 2.
"""

import argparse
import csv
import sys


def fail(message):
    print(f"plot_timeline: {message}", file=sys.stderr)
    sys.exit(2)

PHASES = [  # (from column, to column, colour for passes, colour for squash kernels)
    ("entered_ns", "waited_ns", "0.75", "0.75"),
    ("waited_ns", "first_step_ns", "tab:orange", "tab:green"),
    ("first_step_ns", "steps_done_ns", "tab:blue", "tab:green"),
    ("steps_done_ns", "ended_ns", "tab:red", "tab:red"),
]
SQUASH = 3  # timeline::kSquashKernel


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", help="a file written by halcaps_digitcaps_timeline --csv")
    parser.add_argument("-o", "--output", required=True, help="the image to write (PNG or SVG)")
    args = parser.parse_args()
    try:
        with open(args.csv, newline="") as f:
            rows = list(csv.DictReader(f))
        for r in rows:
            for key in ("kernel", "sm", *{p[0] for p in PHASES}, "ended_ns"):
                r[key] = int(r[key])
    except (OSError, KeyError, ValueError, csv.Error) as e:
        fail(f"cannot read {args.csv}: {e}")
    if not rows:
        fail(f"{args.csv} holds no records")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sms = max(r["sm"] for r in rows) + 1
    fig, ax = plt.subplots(figsize=(12, max(4, sms / 12)))
    for r in rows:
        squash = r["kernel"] == SQUASH
        y = r["sm"] + (0.5 if squash else 0.0)
        for start, stop, pass_colour, squash_colour in PHASES:
            width = (r[stop] - r[start]) / 1000.0
            if width > 0:
                ax.broken_barh([(r[start] / 1000.0, width)], (y, 0.45),
                               facecolors=squash_colour if squash else pass_colour, alpha=0.6, linewidth=0)
    ax.set_xlabel("µs from the first block's entry")
    ax.set_ylabel("SM (passes below, squash kernels above)")
    ax.set_ylim(0, sms)
    ax.set_title(args.csv.rsplit("/", 1)[-1])
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)


if __name__ == "__main__":
    main()

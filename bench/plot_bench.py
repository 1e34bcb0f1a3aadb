#!/usr/bin/env python3
"""Draw the JSON written by `halcaps bench` as a grouped bar chart.

    python3 bench/plot_bench.py RESULTS.json -o OUT.png [--operator predict]
                                [--metric us|pct_bandwidth|speedup_vs_naive] [--log]

One subplot per operator in the file (or only the one named with --operator);
within a subplot, one group of bars per shape and one bar per implementation,
each implementation in the same colour in every subplot. The output format
(PNG or SVG) follows the extension of the -o file. Rows marked "valid": false
are drawn grey and hatched and labelled "invalid"; rows marked "applies": false
(the implementation refused the shape) get no bar and the label "does not
apply". With the default metric
(`us`), a dashed line over each shape group marks the bytes-floor time
(`floor_us`): the time the operator's compulsory bytes take at the measured
copy bandwidth.

Needs matplotlib and the standard library only. Any bad input (a missing or
malformed file, an unknown operator or metric) ends with a one-line error and
exit code 2.
"""

import argparse
import json
import math
import os
import sys

METRICS = {
    "us": "µs per call (lower is better)",
    "pct_bandwidth": "% of copy bandwidth (higher is better)",
    "speedup_vs_naive": "speedup over naive, × (higher is better)",
}
FORMATS = {".png": "png", ".svg": "svg"}
PROG = "plot_bench.py"


class InputError(Exception):
    """Bad input; reported as one line, exit code 2."""


def fail(message):
    print(f"{PROG}: error: {message}", file=sys.stderr)
    sys.exit(2)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Grouped bar chart of a `halcaps bench` JSON file (PNG or SVG by the -o extension).")
    parser.add_argument("results", help="JSON file written by `halcaps bench`")
    parser.add_argument("-o", "--output", required=True, help="output file, .png or .svg")
    parser.add_argument("--operator", help="plot only this operator (default: every operator in the file)")
    parser.add_argument("--metric", default="us", metavar="{" + ",".join(METRICS) + "}",
                        help="y axis: us (default, lower is better), pct_bandwidth or speedup_vs_naive")
    parser.add_argument("--log", action="store_true", help="logarithmic y axis")
    return parser.parse_args(argv)


def number_or_none(row, key):
    """The row's value for key as a finite float, or None when absent/null/non-finite."""
    value = row.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{row.get('_path')}: row {row.get('_index')}: \"{key}\" is {value!r}, not a number")
    value = float(value)
    return value if math.isfinite(value) else None


def load_results(path):
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file")
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory")
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text")
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})")
    if not isinstance(data, dict):
        raise InputError(f"{path}: the top level is not a JSON object")
    rows = data.get("rows")
    if not isinstance(rows, list):
        raise InputError(f"{path}: no \"rows\" list")
    if not rows:
        raise InputError(f"{path}: \"rows\" is empty")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise InputError(f"{path}: row {i} is not a JSON object")
        for key in ("operator", "shape", "implementation"):
            if not isinstance(row.get(key), str) or not row[key]:
                raise InputError(f"{path}: row {i} has no \"{key}\" string")
        for key in ("valid", "applies"):
            if key in row and not isinstance(row[key], bool):
                raise InputError(f"{path}: row {i}: \"{key}\" is {row[key]!r}, not true/false")
        row["_index"] = i
        row["_path"] = path
    return data


def unique(items):
    """Items in order of first appearance, without repeats."""
    return list(dict.fromkeys(items))


def format_value(value, metric):
    if metric == "pct_bandwidth":
        return f"{value:.1f}%"
    if metric == "speedup_vs_naive":
        return f"{value:.2f}×" if value < 10 else f"{value:.1f}×"
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def title_of(data):
    device = data.get("device") or "unknown device"
    kind = data.get("device_kind")
    date = data.get("date") or "undated"
    if isinstance(date, str) and len(date) >= 16 and date[10:11] == "T":
        date = date[:10] + " " + date[11:16] + (" UTC" if date.endswith("Z") else "")
    head = f"{device} ({kind})" if kind and str(kind) not in str(device).lower() else str(device)
    return f"halcaps bench — {head} — {date}"


def plot(data, output, operator=None, metric="us", log=False):
    try:
        import matplotlib
    except ImportError:
        raise InputError("matplotlib is not installed (pip install matplotlib)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    if metric not in METRICS:
        raise InputError(f"unknown metric '{metric}' (choose from {', '.join(METRICS)})")
    ext = os.path.splitext(output)[1].lower()
    if ext not in FORMATS:
        raise InputError(f"output '{output}' must end in .png or .svg")

    rows = data["rows"]
    operators = unique(r["operator"] for r in rows)
    if operator is not None:
        if operator not in operators:
            raise InputError(f"unknown operator '{operator}' (the file has: {', '.join(operators)})")
        operators = [operator]
    rows = [r for r in rows if r["operator"] in operators]
    for r in rows:  # validate the numbers before drawing anything
        r["_value"] = number_or_none(r, metric)
        r["_floor"] = number_or_none(r, "floor_us")

    # Same colour for an implementation in every subplot.
    implementations = unique(r["implementation"] for r in rows)
    family = {}
    for r in rows:
        family.setdefault(r["implementation"], r.get("family"))
    # tab10, or tab20 then tab20b and tab20c past 20 implementations (60 distinct colours).
    if len(implementations) <= 10:
        palette = [plt.get_cmap("tab10")(i) for i in range(10)]
    else:
        palette = [plt.get_cmap(name)(i) for name in ("tab20", "tab20b", "tab20c") for i in range(20)]
    colour = {impl: palette[i % len(palette)] for i, impl in enumerate(implementations)}

    # Layout: per operator, shapes in file order; within a shape, bars in the
    # global implementation order (rows repeated for one key keep file order).
    layout = []
    widest = 1
    for op in operators:
        op_rows = [r for r in rows if r["operator"] == op]
        groups = []
        for shape in unique(r["shape"] for r in op_rows):
            bars = [r for r in op_rows if r["shape"] == shape]
            bars.sort(key=lambda r: (implementations.index(r["implementation"]), r["_index"]))
            keys = [r["implementation"] for r in bars]
            if len(keys) != len(set(keys)):
                print(f"{PROG}: warning: {op}/{shape}: an implementation appears more than once; drawing every row",
                      file=sys.stderr)
            groups.append((shape, bars))
        layout.append((op, groups))
        widest = max(widest, sum(len(b) + 1 for _, b in groups))

    n = len(layout)
    fig_width = min(max(7.0, 0.42 * widest + 2.5), 40.0)
    fig, axes = plt.subplots(n, 1, figsize=(fig_width, 3.8 * n + 0.6), squeeze=False)
    any_invalid = any_floor = any_missing = False
    bar_width = 0.8

    for ax, (op, groups) in zip(axes[:, 0], layout):
        # Height for bars with no number (invalid rows without a time): the
        # tallest number in the subplot, so the hatched stub is visible.
        known = [r["_value"] for _, bars in groups for r in bars
                 if r["_value"] is not None and (r["_value"] > 0 or not log)]
        stub = max(known) if known else 1.0
        rotate = max(len(b) for _, b in groups) > 3
        centres = []
        for gi, (shape, bars) in enumerate(groups):
            width = bar_width / len(bars)
            left = gi - bar_width / 2
            centres.append(gi)
            for bi, r in enumerate(bars):
                x = left + width * (bi + 0.5)
                value = r["_value"]
                valid = r.get("valid", True)
                drawable = value is not None and (value > 0 or not log)
                height = value if drawable else stub
                if not r.get("applies", True):  # refused the shape: no bar
                    height = (min(known) if known else 1.0) if log else 0.0
                    label = "does not apply"
                    valid = False  # grey label
                elif not valid:
                    any_invalid = True
                    ax.bar(x, height, width * 0.92, color="lightgrey", edgecolor="dimgrey",
                           hatch="///", linewidth=0.8)
                    label = "invalid"
                elif drawable:
                    ax.bar(x, height, width * 0.92, color=colour[r["implementation"]], edgecolor="black",
                           linewidth=0.4)
                    label = format_value(value, metric)
                else:  # a valid row without this metric (or ≤ 0 on a log axis): no bar
                    any_missing = any_missing or value is None
                    height = (min(known) if known else 1.0) if log else 0.0
                    label = "n/a" if value is None else format_value(value, metric)
                ax.annotate(label, (x, height), xytext=(0, 2), textcoords="offset points",
                            ha="center", va="bottom", fontsize=6.5, rotation=90 if rotate else 0,
                            color="dimgrey" if not valid else "black")
            if metric == "us":
                floors = [r["_floor"] for r in bars if r["_floor"] is not None and r["_floor"] > 0]
                if floors:
                    any_floor = True
                    floor = min(floors)
                    ax.hlines(floor, left, left + bar_width, colors="black", linestyles="dashed",
                              linewidth=1.1, zorder=3)
        if metric == "speedup_vs_naive":
            ax.axhline(1.0, color="grey", linestyle=":", linewidth=0.9, zorder=0)
        elif metric == "pct_bandwidth":
            ax.axhline(100.0, color="grey", linestyle=":", linewidth=0.9, zorder=0)
        ax.set_xticks(centres)
        ax.set_xticklabels([shape for shape, _ in groups], rotation=20 if len(groups) > 6 else 0,
                           ha="right" if len(groups) > 6 else "center")
        ax.set_xlim(-0.6, len(groups) - 0.4)
        ax.set_title(f"operator: {op}", fontsize=11)
        ax.set_ylabel(METRICS[metric])
        ax.grid(axis="y", linestyle=":", linewidth=0.6, alpha=0.7)
        ax.set_axisbelow(True)
        if log:
            ax.set_yscale("log")
            ax.margins(y=0.25)
        else:
            ax.set_ylim(0, ax.get_ylim()[1] * 1.15)  # room for the labels

    handles = []
    for impl in implementations:
        fam = family.get(impl)
        handles.append(Patch(facecolor=colour[impl], edgecolor="black", linewidth=0.4,
                             label=f"{impl} ({fam})" if fam else impl))
    if any_invalid:
        handles.append(Patch(facecolor="lightgrey", edgecolor="dimgrey", hatch="///",
                             label="invalid (failed the reference check)"))
    if any_floor:
        handles.append(Line2D([], [], color="black", linestyle="dashed", label="bytes floor at copy bandwidth"))
    if metric == "speedup_vs_naive":
        handles.append(Line2D([], [], color="grey", linestyle=":", label="naive (1×)"))
    elif metric == "pct_bandwidth":
        handles.append(Line2D([], [], color="grey", linestyle=":", label="100% of copy bandwidth"))
    fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 0.95), fontsize=8.5,
               title="implementation", title_fontsize=9, frameon=False)

    title = title_of(data)
    bandwidth = data.get("copy_bandwidth_gbs")
    if isinstance(bandwidth, (int, float)) and not isinstance(bandwidth, bool):
        title += f"\ncopy bandwidth {bandwidth:,.0f} GB/s"
    fig.suptitle(title, fontsize=12)
    # Keep the subplots below the title's lines (tight_layout leaves the suptitle out).
    title_inches = 0.22 * (title.count("\n") + 1) + 0.1
    fig.tight_layout(rect=(0, 0, 1, 1 - title_inches / fig.get_figheight()))
    if any_missing:
        print(f"{PROG}: warning: some valid rows have no '{metric}' value; labelled n/a", file=sys.stderr)
    try:
        fig.savefig(output, format=FORMATS[ext], dpi=150, bbox_inches="tight")
    except OSError as e:
        raise InputError(f"cannot write {output}: {e.strerror}")
    finally:
        plt.close(fig)


def main(argv=None):
    args = parse_args(argv)
    try:
        if args.metric not in METRICS:  # before reading anything
            raise InputError(f"unknown metric '{args.metric}' (choose from {', '.join(METRICS)})")
        if os.path.splitext(args.output)[1].lower() not in FORMATS:
            raise InputError(f"output '{args.output}' must end in .png or .svg")
        data = load_results(args.results)
        plot(data, args.output, operator=args.operator, metric=args.metric, log=args.log)
    except InputError as e:
        fail(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())

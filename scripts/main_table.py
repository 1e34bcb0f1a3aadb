#!/usr/bin/env python3
"""Print the main job's rows as one table (scripts/run-main.sh).

Arguments: FILE.json:IMPL,IMPL,... per operator, from `halcaps bench --json`,
the implementations in the order default, baseline, peers ("-": none); and
optionally --pytorch FILE, the JSON lines of bench/pytorch_digitcaps.py, whose
rows join their operator's as peers (checked by that script against eager
PyTorch, not by halcaps; for digitcaps_backward they time forward + backward).
Exits 1 when a row failed its check against the float64 reference or is
missing.
"""
import json
import sys


def pytorch_rows(path):
    rows = {}
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            r = json.loads(line)
            if r.get("B") == 128:
                rows.setdefault(r["operator"], []).append(r)
    return rows


def main(arguments):
    peers = {}
    if len(arguments) >= 2 and arguments[0] == "--pytorch":
        peers = pytorch_rows(arguments[1])
        arguments = arguments[2:]
    failed = False
    lines = []
    device = ""
    for argument in arguments:
        path, _, names = argument.rpartition(":")
        wanted = names.split(",")
        with open(path) as f:
            run = json.load(f)
        device = run.get("device", device)
        op = path.rsplit("/", 1)[-1].removesuffix(".json")  # run-main.sh names each file after its operator
        rows = {r["implementation"]: r for r in run["rows"] if r["operator"] == op}
        default_us = None
        for position, name in enumerate(wanted):
            role = "default" if position == 0 else "baseline" if position == 1 else "peer"
            if name == "-":  # no such row in this build or for this operator
                continue
            row = rows.get(name)
            if row is None:
                lines.append((op, "", name, role, "MISSING", "", ""))
                failed = True
                continue
            if not row.get("applies", True):
                lines.append((op, row["shape"], name, role, "n/a", "", ""))
                continue
            check = "ok" if row["valid"] else "WRONG"
            failed |= not row["valid"]
            us = row["us"]
            if position == 0:
                default_us = us
            ratio = f"{us / default_us:.2f}" if default_us else ""
            lines.append((op, row["shape"], name, role, check, f"{us:.1f}", ratio))
        for r in peers.get(op, []):
            ratio = f"{r['us'] / default_us:.2f}" if default_us else ""
            lines.append((op, "mnist_b128", r["implementation"], "peer", "-", f"{r['us']:.1f}", ratio))
    header = ("operator", "shape", "implementation", "role", "check", "µs", "× default's time")
    widths = [max(len(str(x[i])) for x in lines + [header]) for i in range(len(header))]
    print(f"halcaps main job on {device}: each row checked against the float64 reference, then timed (median)")
    for line in [header] + lines:
        print("  ".join(str(x).ljust(w) if i < 5 else str(x).rjust(w) for i, (x, w) in enumerate(zip(line, widths))))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Checks that the README and docs/ cannot drift from the build.

  docs_check.py names CLI SOURCE_DIR [--not-built NAME,...] [--no-cuda]
      Every implementation name in a Markdown table column whose header
      contains "implementations" (README.md, docs/*.md) must be listed by
      `halcaps info` for that row's operator (the backticked name in its
      "operator" column) on the column's device ("CPU" or "CUDA" in its
      header; either when it names neither). Names are the backticked words of
      the cell. --not-built lists names this build leaves out by its options
      (cuDNN absent, beam-search kernels off); --no-cuda skips CUDA columns.

  docs_check.py quick-start SOURCE_DIR BUILD_DIR WORK_DIR
      Runs each README.md block between <!-- quick-start:begin --> and
      <!-- quick-start:end --> as one bash script (-euo pipefail), in
      WORK_DIR, where `build` links to BUILD_DIR and every other top-level
      entry (.venv included) to SOURCE_DIR's.
"""
import os
import re
import shutil
import subprocess
import sys

BENCH_ONLY = {"naive-openmp", "cublas_gemm_only", "cudnn_core"}  # bench rows that are no implementation
NAME = re.compile(r"`([A-Za-z0-9_:=,.-]+)`")


def markdown_files(source_dir):
    files = [os.path.join(source_dir, "README.md")]
    docs = os.path.join(source_dir, "docs")
    files += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    return files


def split_row(line):
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def documented_names(path):
    """(file, line number, operator or None, device or None, name) of every name in an implementations column."""
    found = []
    lines = open(path, encoding="utf-8").read().splitlines()
    n = 0
    while n < len(lines):
        if not (lines[n].startswith("|") and n + 1 < len(lines) and re.match(r"^\|[-:| ]+\|$", lines[n + 1])):
            n += 1
            continue
        header = [h.lower() for h in split_row(lines[n])]
        columns = [c for c, h in enumerate(header) if "implementations" in h]
        operator_column = next((c for c, h in enumerate(header) if h in ("operator", "op")), None)
        n += 2
        while n < len(lines) and lines[n].startswith("|"):
            cells = split_row(lines[n])
            operator = None
            if operator_column is not None and operator_column < len(cells):
                match = NAME.search(cells[operator_column])
                operator = match.group(1) if match else None
            for c in columns:
                device = "cpu" if "cpu" in header[c] else "cuda" if "cuda" in header[c] else None
                if c < len(cells):
                    for name in NAME.findall(cells[c]):
                        found.append((path, n + 1, operator, device, name))
            n += 1
    return found


def check_names(cli, source_dir, not_built, no_cuda):
    info = subprocess.run([cli, "info"], check=True, capture_output=True, text=True).stdout.splitlines()
    listed = set()
    for line in info:
        fields = line.split()
        if len(fields) >= 3 and fields[2] in ("cpu", "cuda"):
            listed.add((fields[0], fields[1], fields[2]))
    if not listed:
        print("halcaps info listed no implementations")
        return 1
    errors = checked = skipped = 0
    for path, line, operator, device, name in (x for f in markdown_files(source_dir) for x in documented_names(f)):
        where = f"{os.path.relpath(path, source_dir)}:{line}"
        if name in BENCH_ONLY or (no_cuda and device == "cuda") or name in not_built:
            skipped += 1
            continue
        matches = [x for x in listed if x[1] == name and (operator is None or x[0] == operator)
                   and (device is None or x[2] == device)]
        checked += 1
        if not matches:
            errors += 1
            print(f"{where}: `{name}` ({operator or 'any operator'}, {device or 'any device'}) "
                  f"is not in `halcaps info`")
    print(f"{checked} documented implementation names checked against `halcaps info`, {errors} missing, "
          f"{skipped} not built here or bench-only")
    if checked == 0:
        print("no implementation names found: the tables' headers changed?")
        return 1
    return 1 if errors else 0


def quick_start_blocks(source_dir):
    """Each marked block's lines, code fences left out."""
    text = open(os.path.join(source_dir, "README.md"), encoding="utf-8").read()
    blocks = re.findall(r"<!-- quick-start:begin -->(.*?)<!-- quick-start:end -->", text, re.S)
    if not blocks:
        raise SystemExit("README.md has no <!-- quick-start:begin --> ... <!-- quick-start:end --> block")
    out = []
    for block in blocks:
        lines = [l for l in block.splitlines() if l.strip() and not l.strip().startswith("```")]
        if not lines:
            raise SystemExit("README.md has an empty quick-start block")
        out.append(lines)
    return out


def run_quick_start(source_dir, build_dir, work_dir):
    shutil.rmtree(work_dir, ignore_errors=True)
    os.makedirs(work_dir)
    for entry in os.listdir(source_dir):
        if entry not in ("build", ".git"):
            os.symlink(os.path.join(source_dir, entry), os.path.join(work_dir, entry))
    os.symlink(os.path.abspath(build_dir), os.path.join(work_dir, "build"))
    shutil.rmtree(os.path.join(build_dir, "quick-start"), ignore_errors=True)
    for number, lines in enumerate(quick_start_blocks(source_dir), 1):
        result = subprocess.run(["bash", "-euxo", "pipefail", "-c", "\n".join(lines) + "\n"], cwd=work_dir)
        if result.returncode != 0:
            print(f"README's quick-start block {number} failed ({result.returncode}); the trace above shows the line")
            return 1
    return 0


def main(argv):
    if len(argv) >= 3 and argv[0] == "names":
        not_built = set()
        if "--not-built" in argv:
            not_built = set(filter(None, argv[argv.index("--not-built") + 1].split(",")))
        return check_names(argv[1], argv[2], not_built, "--no-cuda" in argv)
    if len(argv) == 4 and argv[0] == "quick-start":
        return run_quick_start(*argv[1:])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

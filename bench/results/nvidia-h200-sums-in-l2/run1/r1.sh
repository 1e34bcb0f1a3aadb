#!/usr/bin/env bash
# Run 1: bench/partial_sum_atomics three times (the device tool's call:
# `nvidia-smi ...; for r in 1 2 3; do .gpu/partial_sum_atomics; done`).
# Binary in .gpu/: partial_sum_atomics (not compressed).
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-sums-in-l2/run1}
mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > "$out/gpu.txt"
for r in 1 2 3; do .gpu/partial_sum_atomics; done > "$out/partial_sum_atomics.txt" 2>&1

#!/usr/bin/env bash
# Run 4: run 3 with the squash at a pass's start free of divisions and
# branches (power_of_two_near_inverse, squash_factor). The CUDA tests
# that cover the layer and both training pairs, `halcaps bench` on the
# layer (two rounds; A is run 2's halcaps_prev, not carried this time), and
# the timeline probe at MNIST b128 and b512 with its records.
# Binaries in .gpu/: halcaps.xz, halcaps_cuda_tests.xz, halcaps_digitcaps_timeline.xz.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-sums-in-l2/run4}
OP="digitcaps" BINARIES="halcaps" ROUNDS=2 SANITIZE_SHAPES="" \
TESTS=layer \
    bash bench/gpu_ab.sh "$out"
xz -dc .gpu/halcaps_digitcaps_timeline.xz > /tmp/probe && chmod +x /tmp/probe
mkdir -p /tmp/csv
timeout 120 /tmp/probe --csv /tmp/csv/timeline 128 512 > "$out/probe.txt" 2>&1
echo "rc $?" >> "$out/probe.txt"; cat "$out/probe.txt"
tar cJf "$out/timeline_csv.tar.xz" -C /tmp/csv .

#!/usr/bin/env bash
# Run 5: run 4's change with the squash at a pass's start taken step by step
# over all of a thread's pieces (no branch between pieces), against the
# layer before (A, halcaps_prev: 641ecf0's build, as in run 2): the CUDA
# tests that cover the layer and both training pairs on B, then three
# rounds of `halcaps bench` alternating A and B on digitcaps (with its
# training pairs' rows).
# Binaries in .gpu/: halcaps_prev.xz, halcaps.xz, halcaps_cuda_tests.xz.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-sums-in-l2/run5}
OP="digitcaps" BINARIES="halcaps_prev halcaps" ROUNDS=3 SANITIZE_SHAPES="" \
TESTS=layer \
    bash bench/gpu_ab.sh "$out"

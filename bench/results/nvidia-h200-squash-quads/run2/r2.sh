#!/usr/bin/env bash
# Run 2: at most 4 chunks a thread (halcaps_q4: HALCAPS_SQUASH_QUAD_CHUNKS
# 4, 16 groups a row at MNIST b128, one round of loads) against 8
# (halcaps: run 1's candidate) and main's build (halcaps_prev), two rounds
# of `halcaps bench` on digitcaps, and ncu's squash kernels at MNIST b128
# and b512.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-squash-quads/run2}
OP="digitcaps" BINARIES="halcaps_prev halcaps halcaps_q4" ROUNDS=2 TESTS="" SANITIZE_SHAPES="" \
NCU_KERNELS="squash" NCU_SHAPES="mnist_b128,mnist_b512" NCU_LAUNCHES=3 \
    bash bench/gpu_ab.sh "$out"

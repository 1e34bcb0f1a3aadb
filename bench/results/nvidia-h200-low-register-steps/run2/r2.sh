#!/usr/bin/env bash
# Run 2: run 1's kernels with the plan's chunks filling the device at the
# shallower staging's occupancy (three blocks an SM at 168 registers; in run
# 1 the plan took the deeper staging's two, so the grid ran two blocks an
# SM), and kShortChunkSteps 32 so that MNIST b512 (24 steps) runs shallow
# too; against 641ecf0's build (halcaps_prev). The CUDA tests that cover the
# layer and both training pairs on B, three rounds of `halcaps bench`
# alternating A and B on digitcaps, ncu's time and instructions per kernel
# at MNIST b128.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-low-register-steps/run2}
OP="digitcaps" BINARIES="halcaps_prev halcaps" ROUNDS=3 SANITIZE_SHAPES="" \
NCU_KERNELS="pass_kernel|squash" NCU_LAUNCHES=6 \
TESTS=layer \
    bash bench/gpu_ab.sh "$out"

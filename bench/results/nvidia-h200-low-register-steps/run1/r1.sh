#!/usr/bin/env bash
# Run 1: the pass kernels at three blocks an SM (168 registers), the
# passes with the logits computing u_hat twice a step (for the logits,
# then for the sums) so that no lane holds every j's u_hat, the first pass
# at one row tile a warp (branch low-register-steps), against the layer
# before (A, halcaps_prev: 641ecf0's build): the CUDA tests that cover the
# layer and both training pairs on B, then three rounds of `halcaps bench`
# alternating A and B on digitcaps and digitcaps_backward, and ncu's time
# and instructions per pass kernel at MNIST b128.
# Binaries in .gpu/: halcaps_prev.xz, halcaps.xz, halcaps_cuda_tests.xz.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-low-register-steps/run1}
OP="digitcaps digitcaps_backward" BINARIES="halcaps_prev halcaps" ROUNDS=3 SANITIZE_SHAPES="" \
NCU_KERNELS="pass_kernel|squash" NCU_LAUNCHES=6 \
TESTS=layer \
    bash bench/gpu_ab.sh "$out"

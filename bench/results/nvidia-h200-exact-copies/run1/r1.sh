#!/usr/bin/env bash
# Run 1: the dense staging copies of a step with compile-time addresses where
# W[i] fills the variant's rows (out_caps = JM, dense: MNIST's) and the step's
# i-lanes all lie in the chunk (`exact` in stage_dense), against main's build
# (halcaps_prev: 80c54e3, whose kernels are 953cdb3's). The CUDA tests that
# cover the layer and both training pairs on the candidate; memcheck,
# racecheck and synccheck on its forward at MNIST b128 (every step exact),
# 37:151:8:10:16 (out_caps = JM, chunks with a last step of one i-lane) and
# 33:70:5:7:13 (not dense: the old path); three rounds of `halcaps bench`
# alternating the two on digitcaps and digitcaps_backward; ncu's time and
# instructions of the pass kernels at MNIST b128 and b512.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-exact-copies/run1}
OP="digitcaps digitcaps_backward" BINARIES="halcaps_prev halcaps" ROUNDS=3 \
SANITIZE_SHAPES="mnist_b128 37:151:8:10:16 33:70:5:7:13" TESTS=layer \
NCU_KERNELS="pass_kernel" NCU_SHAPES="mnist_b128,mnist_b512" NCU_LAUNCHES=3 \
    bash bench/gpu_ab.sh "$out"

#!/usr/bin/env bash
# Run 3: the permuted v_sum rows (16-byte loads) only in the forward's
# agreement passes with two stages that store no c (kPermuted); every other
# pass keeps v_sum's own row order and 8-byte loads, as on main. Against
# main's build (halcaps_prev, as in run 1). The CUDA tests that cover the
# layer and both training pairs on B, the three sanitizers on B at MNIST b128
# and at 37:150:8:9:16, three rounds of `halcaps bench` alternating A and B
# on digitcaps and digitcaps_backward.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-v-rows-16b/run3}
OP="digitcaps digitcaps_backward" BINARIES="halcaps_prev halcaps" ROUNDS=3 \
SANITIZE_SHAPES="mnist_b128 37:150:8:9:16" NCU_KERNELS="" \
TESTS=layer \
    bash bench/gpu_ab.sh "$out"

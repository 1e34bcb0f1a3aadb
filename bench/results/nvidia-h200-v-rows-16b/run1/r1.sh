#!/usr/bin/env bash
# Run 1: v_sum's rows staged with their columns permuted so that a lane's
# values of one j lie together (one 16-byte load a row and j at two out_dim
# tiles, in the passes that store no coefficients), with step 0 waiting for
# the rows at its top as on main (branch v-rows-16b-main); against main's
# build (halcaps_prev: 222983c, the same SASS as main). The CUDA tests that
# cover the layer and both training pairs on B, the three sanitizers on B at
# MNIST b128 and at 37:150:8:9:16, three rounds of `halcaps bench`
# alternating A and B on digitcaps and digitcaps_backward, ncu's time and
# instructions per pass kernel at MNIST b128.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-v-rows-16b/run1}
OP="digitcaps digitcaps_backward" BINARIES="halcaps_prev halcaps" ROUNDS=3 \
SANITIZE_SHAPES="mnist_b128 37:150:8:9:16" NCU_KERNELS="pass_kernel" NCU_LAUNCHES=6 \
TESTS=layer \
    bash bench/gpu_ab.sh "$out"

#!/usr/bin/env bash
# Run 2: v_sum's rows staged with their columns permuted so that a lane's
# values of one j lie together (one 16-byte load a row at two out_dim tiles,
# in the passes that store no coefficients), and step 0 waiting for the
# rows only after its products (branch v-rows-together); against 222983c's
# build (halcaps_prev, run 1's candidate). The CUDA tests that cover the
# layer and both training pairs on B, the three sanitizers on B at MNIST b128
# and at 37:150:8:9:16, three rounds of `halcaps bench` alternating A and B
# on digitcaps and digitcaps_backward.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-step-instructions/run2}
OP="digitcaps digitcaps_backward" BINARIES="halcaps_prev halcaps" ROUNDS=3 \
SANITIZE_SHAPES="mnist_b128 37:150:8:9:16" NCU_KERNELS="" \
TESTS=layer \
    bash bench/gpu_ab.sh "$out"

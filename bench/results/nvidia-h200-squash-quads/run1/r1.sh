#!/usr/bin/env bash
# Run 1: the squash kernel with each thread adding a row's 4 consecutive
# floats as one 16-byte load a chunk, where out_dim is a multiple of 4 and
# the buffers 16-byte aligned (squash_quads_kernel, at most 8 chunks a
# thread; branch squash-quads), against main's build (halcaps_prev:
# 80c54e3). The CUDA tests that cover the layer and both training pairs on
# the candidate; memcheck, racecheck and synccheck on its forward at MNIST
# b128, 37:150:8:9:16 and 33:70:5:7:12 (out_dim 12: three quads a row);
# three rounds of `halcaps bench` alternating the two on digitcaps and
# digitcaps_backward (whose forward replay runs the squash kernel); ncu's
# time and instructions of each call's three squash kernels at MNIST b128
# and b512.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-squash-quads/run1}
OP="digitcaps digitcaps_backward" BINARIES="halcaps_prev halcaps" ROUNDS=3 \
SANITIZE_SHAPES="mnist_b128 37:150:8:9:16 33:70:5:7:12" TESTS=layer \
NCU_KERNELS="squash" NCU_SHAPES="mnist_b128,mnist_b512" NCU_LAUNCHES=3 \
    bash bench/gpu_ab.sh "$out"

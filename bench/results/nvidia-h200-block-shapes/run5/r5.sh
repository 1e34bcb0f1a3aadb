#!/bin/bash
# Run 5: the session's start against its end, through the shared bench/gpu_ab.sh (its first use):
# .gpu/halcaps_prev.xz is c2b4824, .gpu/halcaps.xz is 5e7a3e1; three rounds at MNIST b128 and b512, and ncu per
# kernel at the GPU's clocks at both shapes. (Tests and sanitizers of 5e7a3e1: run 4.)
SHAPES=mnist_b128,mnist_b512 BINARIES="halcaps_prev halcaps" ROUNDS=3 TESTS="" SANITIZE_SHAPES="" \
  NCU_KERNELS="pass_kernel|squash" NCU_SHAPES=mnist_b128,mnist_b512 NCU_LAUNCHES=6 bash bench/gpu_ab.sh "$OUT"

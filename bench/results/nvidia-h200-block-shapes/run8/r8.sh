#!/bin/bash
# Run 8: cuda_tensor choosing its staging depth by the chunk's steps (2 stages where an i-lane's chunk is at most
# 16 steps, else 3; the kernels' SASS is that of run 7's stages-2 binary and of 5e7a3e1) (.gpu/halcaps_stages.xz,
# .gpu/halcaps_cuda_tests.xz); .gpu/halcaps.xz is 5e7a3e1. The CUDA DigitCaps tests; sanitizers at six shapes;
# three rounds at MNIST b128 and b512.
OP=digitcaps IMPLEMENTATIONS=cuda_tensor SHAPES=mnist_b128,mnist_b512 BINARIES="halcaps halcaps_stages" \
  ROUNDS=3 TESTS="[digitcaps]" SANITIZE_SHAPES="1:1:1:1:1 130:37:8:11:16 65:300:8:10:16 40:37:8:10:16 33:9:9:3:9 512:200:8:10:16" \
  NCU_KERNELS="" bash bench/gpu_ab.sh "$OUT"

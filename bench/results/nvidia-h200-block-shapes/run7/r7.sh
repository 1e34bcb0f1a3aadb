#!/bin/bash
# Run 7: cuda_tensor's staging depth again after runs 2-3 made the step's compute shorter: kStages 2 and 4
# (.gpu/halcaps_stages2.xz, .gpu/halcaps_stages4.xz) against 5e7a3e1's 3 (.gpu/halcaps.xz); three rounds at MNIST
# b128 and b512, sanitizers on the stages-4 binary at four shapes.
OP=digitcaps IMPLEMENTATIONS=cuda_tensor SHAPES=mnist_b128,mnist_b512 BINARIES="halcaps halcaps_stages2 halcaps_stages4" \
  ROUNDS=3 TESTS="" SANITIZE_SHAPES="1:1:1:1:1 130:37:8:11:16 65:300:8:10:16 512:200:8:10:16" NCU_KERNELS="" \
  bash bench/gpu_ab.sh "$OUT"

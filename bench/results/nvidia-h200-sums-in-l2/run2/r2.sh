#!/usr/bin/env bash
# Run 2: the passes adding their sums by atomics (B, halcaps) against the
# layer before (A, halcaps_prev: 641ecf0, whose forward kernels the change's
# parent kept): the CUDA tests that cover the layer and both training pairs,
# memcheck, racecheck and synccheck on B at MNIST b128, then two rounds of
# `halcaps bench` alternating A and B on digitcaps and digitcaps_backward
# (with their training pairs' rows), and the registers of B's pass kernels.
# Binaries in .gpu/: halcaps_prev.xz, halcaps.xz, halcaps_cuda_tests.xz.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-sums-in-l2/run2}
OP="digitcaps digitcaps_backward" BINARIES="halcaps_prev halcaps" ROUNDS=2 SANITIZE_SHAPES="mnist_b128" \
TESTS=layer \
    bash bench/gpu_ab.sh "$out"
xz -dc .gpu/halcaps.xz > /tmp/halcaps_b && cuobjdump --dump-resource-usage /tmp/halcaps_b 2>/dev/null |
    grep -A1 "pass_kernel.*VariantILi10ELi2ELi1E" | grep -o "Function [^:]*\|REG:[0-9]*\|STACK:[0-9]*" | paste - - - > "$out/registers.txt"

#!/usr/bin/env bash
# Run 1: fewer instructions a step in the pass kernels (branch
# indexed-gather): c gathered by indexed shuffles with no selects, b0's
# staged floats past out_caps -inf so that the logits need no test of j,
# the staging copies' addresses advanced a step at a time, and the
# softmax's reciprocal one rcp.approx.ftz; against 641ecf0's build
# (halcaps_prev). The CUDA tests that cover the layer and both training
# pairs on B, the three sanitizers on B at a shape with out_caps below its
# variant's (J 9 of 10: the -inf padding), three rounds of `halcaps bench`
# alternating A and B on digitcaps and digitcaps_backward, ncu's time and
# instructions per kernel at MNIST b128.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-step-instructions/run1}
OP="digitcaps digitcaps_backward" BINARIES="halcaps_prev halcaps" ROUNDS=3 SANITIZE_SHAPES="37:150:8:9:16" \
NCU_KERNELS="pass_kernel|squash" NCU_LAUNCHES=6 \
TESTS=layer \
    bash bench/gpu_ab.sh "$out"

#!/usr/bin/env bash
# Run 8: cuda_passes' forward pass without run 7's limit of 4 blocks an SM
# (it spilled), and its grad_u_hat kernel with a thread per 8 floats of a
# row (halcaps), against run 7's build (halcaps_prev), alternating in bench,
# after the new build's hand_backward tests; ncu's time per kernel of both at
# MNIST b128. bench/gpu_ab.sh with these settings:
OUT_DIR=${OUT:-bench/results/nvidia-h200-hand-backward/run8}
OP=digitcaps_backward IMPLEMENTATIONS=cuda_passes,rows_vectors TESTS="[hand_backward]" ROUNDS=2 \
    BINARIES="halcaps_prev halcaps" NCU_KERNELS="forward_pass|backward_pass|grad_u_hat_rows" NCU_LAUNCHES=6 \
    bash bench/gpu_ab.sh "$OUT_DIR"

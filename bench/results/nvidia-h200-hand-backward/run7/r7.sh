#!/usr/bin/env bash
# Run 7: cuda_passes' grad_u_hat kernel with a thread per 4 floats of a row
# (a warp's 16-byte stores one contiguous stretch), the forward pass held to
# 4 blocks an SM, and the grid in whole waves of both pass kernels
# (halcaps), against run 6's build (halcaps_prev), alternating in bench,
# after the new build's hand_backward tests; ncu's time per kernel of the new
# build at MNIST b128. bench/gpu_ab.sh with these settings:
OUT_DIR=${OUT:-bench/results/nvidia-h200-hand-backward/run7}
OP=digitcaps_backward IMPLEMENTATIONS=cuda_passes,rows_vectors TESTS="[hand_backward]" ROUNDS=2 \
    BINARIES="halcaps_prev halcaps" NCU_KERNELS="forward_pass|backward_pass|grad_u_hat_rows" NCU_LAUNCHES=6 \
    bash bench/gpu_ab.sh "$OUT_DIR"

#!/usr/bin/env bash
# Run 1 (a probe): the agreement passes at __launch_bounds__(128, 3), at
# most 168 registers (ptxas spills 96-112 bytes of the MNIST variant's 242),
# so that the plan (which takes the agreement pass's occupancy) cuts the
# input capsules into chunks for three blocks an SM: at MNIST b128 96 chunks
# of 12, 6 steps a warp, against 64 of 18 and 9 steps. Branch
# agreement-three-blocks; halcaps is the build before (953cdb3, the b0
# padding change), halcaps_lb3 the probe. Two rounds of `halcaps bench`
# alternating the two on digitcaps (each checked against the float64
# reference before it is timed), and ncu's time and instructions per
# kernel at MNIST b128 and b512.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-agreement-three-blocks/run1}
OP="digitcaps" BINARIES="halcaps halcaps_lb3" ROUNDS=2 TESTS="" SANITIZE_SHAPES="" \
NCU_KERNELS="pass_kernel|squash_kernel" NCU_SHAPES="mnist_b128,mnist_b512" NCU_LAUNCHES=6 \
    bash bench/gpu_ab.sh "$out"

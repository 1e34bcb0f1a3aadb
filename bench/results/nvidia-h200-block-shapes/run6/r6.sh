#!/bin/bash
# Run 6: the squash kernel allowed up to 16 chunks a thread (digitcaps_shared.cuh's launch_squash_ep, 8 before), so
# that MNIST b128's 64 chunks take 4 groups and 2 rows a block, 640 blocks, in place of 8 groups, one row, 1280
# blocks (b512's 16 chunks unchanged) (.gpu/halcaps_g16.xz); .gpu/halcaps.xz is 5e7a3e1. cuda_tensor and
# cuda_fused, three rounds; sanitizers on the candidate at four shapes; ncu on the squash kernels at b128.
OP=digitcaps IMPLEMENTATIONS=cuda_tensor,cuda_fused SHAPES=mnist_b128,mnist_b512 BINARIES="halcaps halcaps_g16" \
  ROUNDS=3 TESTS="" SANITIZE_SHAPES="1:1:1:1:1 130:37:8:11:16 65:300:8:10:16 5:17:3:2:31" \
  NCU_KERNELS="squash" NCU_SHAPES=mnist_b128 NCU_LAUNCHES=3 bash bench/gpu_ab.sh "$OUT"

#!/bin/bash
# Run 2: issue 4's ratios from one call with the head of main, c8e7dbf (.gpu/halcaps_prev.xz, the stage-count
# change of bench/results/nvidia-h200-block-shapes/ run 8, not timed beside its PyTorch peers before): cuda_tensor
# at MNIST b128 and b512, then bench/pytorch_digitcaps.py (eager and torch.compile), on the same GPU.
G=/tmp/bin; mkdir -p $G; xz -dc .gpu/halcaps_prev.xz > $G/halcaps && chmod +x $G/halcaps
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_tensor \
  --repeats 30 --seed 9211 > $OUT/bench.txt 2>&1; grep -E "^digitcaps " $OUT/bench.txt | awk '{print $2, $3, $5, $6}'
timeout 200 python3 bench/pytorch_digitcaps.py --shapes 128 512 --repeats 30 > $OUT/pytorch.txt 2>&1
grep -o '"B": [0-9]*\|"implementation": "[a-z_]*", "us": [0-9.]*' $OUT/pytorch.txt | paste - -

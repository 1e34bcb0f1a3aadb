#!/bin/bash
# Run 2: issue 4's ratios from one call, with run 1's binary (.gpu/halcaps.xz): cuda_tensor at MNIST b128 and b512,
# then the PyTorch peers (bench/pytorch_digitcaps.py, eager and torch.compile).
G=/tmp/bin; mkdir -p $G; xz -dc .gpu/halcaps.xz > $G/halcaps && chmod +x $G/halcaps
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_tensor \
  --repeats 30 --seed 9011 > $OUT/bench.txt 2>&1; grep -E "^digitcaps " $OUT/bench.txt | awk '{print $2, $3, $5, $6}'
timeout 150 python3 bench/pytorch_digitcaps.py --shapes 128 512 --repeats 30 > $OUT/pytorch.txt 2>&1
grep -o '"B": [0-9]*\|"implementation": "[a-z_]*", "us": [0-9.]*' $OUT/pytorch.txt | paste - - 

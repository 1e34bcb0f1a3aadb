#!/bin/bash
# The DigitCaps layer's implementations and its PyTorch peers in one call on one GPU, with the binaries of the commit
# that adds this script (.gpu/halcaps.xz, .gpu/halcaps_cuda_tests.xz): `halcaps bench --op digitcaps` at MNIST b128
# and b512 (every implementation, checked before timed), bench/pytorch_digitcaps.py (eager and torch.compile), then
# every CUDA test. Outputs: bench.txt, bench.md, bench.json, pytorch.txt, cuda_tests.log.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 300 $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --repeats 30 --seed 2331 \
  --json $OUT/bench.json --markdown $OUT/bench.md > $OUT/bench.txt 2>&1; echo "rc $?" >> $OUT/bench.txt
grep -E "^digitcaps |rc " $OUT/bench.txt | awk '{print $2, $3, $5, $6}'
timeout 150 python3 bench/pytorch_digitcaps.py --shapes 128 512 --repeats 30 > $OUT/pytorch.txt 2>&1; tail -6 $OUT/pytorch.txt
timeout 420 $G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40

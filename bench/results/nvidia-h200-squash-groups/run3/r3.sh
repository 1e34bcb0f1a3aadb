#!/bin/bash
# Session 2026-11-22h, run 3: the committed binaries (c3a124a). Every CUDA test; the layer forward (every
# implementation) and the backward defaults (with and without s), with the PyTorch peers right after.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --repeats 30 --seed 781 \
  --json $OUT/digitcaps.json --markdown $OUT/digitcaps.md > $OUT/bench.txt 2>&1
$G/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --implementations rows_predict,rows_vectors \
  --repeats 30 --seed 782 --json $OUT/digitcaps_backward.json >> $OUT/bench.txt 2>&1
python3 bench/pytorch_digitcaps.py --shapes 128 512 --repeats 30 > $OUT/pytorch.txt 2>&1
grep -E "^digitcaps|copy" $OUT/bench.txt; grep '"us"' $OUT/pytorch.txt | cut -c1-200

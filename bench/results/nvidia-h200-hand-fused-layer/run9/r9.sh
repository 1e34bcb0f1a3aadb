#!/bin/bash
# Session 2026-11-22i, run 9: the binaries after the review's mends (a31883c: cuda_fused's host side says each
# thing once, the refusal carries the extent's value; the next commit: one aligned16 for every hand-written CUDA
# file). Every CUDA test, then cuda_fused and the other hand-written layer and prediction versions once more in
# the bench (checked against the reference before timing).
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_fused,cuda_naive,fused_split_all_vectors \
  --repeats 30 --seed 971 > $OUT/bench.txt 2>&1
$G/halcaps bench --device cuda --op predict --shapes mnist_b128,wide_b32 --repeats 10 --seed 972 >> $OUT/bench.txt 2>&1
grep -E "^digitcaps |^predict |copy" $OUT/bench.txt | grep -E "cuda|copy|cublas"

#!/bin/bash
# Session 2026-11-21b, run 3: fused_split_vectors tiling variants.
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
$G/halcaps_cuda_tests "cuda digitcaps: odd sizes and tile edges, 1, 3 and 5 iterations" > $OUT/cuda_tests_odd.log 2>&1; echo "rc $?" >> $OUT/cuda_tests_odd.log
tail -3 $OUT/cuda_tests_odd.log
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 \
  --implementations fused_split_vectors,fused_split_vectors_b16,fused_split_vectors_c5,fused_split_vectors_lg4,fused_split_vectors_lg8 --repeats 30 --seed 221 \
  > $OUT/variants.txt 2>&1
cat $OUT/variants.txt

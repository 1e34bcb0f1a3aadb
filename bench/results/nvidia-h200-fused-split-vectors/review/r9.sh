#!/bin/bash
# Session 2026-11-21b, run 9 (review): the fused layer reads u through prediction_u (its k index clamped too);
# fused_split_vectors' and fused_split's PTX unchanged, fused's changed.
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
$G/halcaps_cuda_tests "[digitcaps],[routing]" > $OUT/cuda_tests_digitcaps_routing.log 2>&1; echo "rc $?" >> $OUT/cuda_tests_digitcaps_routing.log
tail -3 $OUT/cuda_tests_digitcaps_routing.log
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 \
  --implementations fused,fused_split_vectors --repeats 30 --seed 281 > $OUT/digitcaps.txt 2>&1
cat $OUT/digitcaps.txt

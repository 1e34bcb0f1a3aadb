#!/bin/bash
# Session 2026-11-21b, run 7: group sums in 32 groups (fused_split_vectors_g32) against 8.
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 \
  --implementations fused_split_vectors,fused_split_vectors_g32 --repeats 30 --seed 261 > $OUT/groups.txt 2>&1
cat $OUT/groups.txt
ncu --metrics gpu__time_duration.sum \
  $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 --implementations fused_split_vectors_g32 --repeats 1 --warmup 0 --seed 262 > $OUT/ncu_g32.txt 2>&1
grep -E "^  _kernel|duration" $OUT/ncu_g32.txt | tail -24

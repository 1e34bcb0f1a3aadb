#!/bin/bash
# Session 2026-11-21b, run 1: fused_split_vectors checks and timing.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
./halcaps_cuda_tests "[digitcaps]" > $OUT/cuda_tests_digitcaps.log 2>&1; echo "digitcaps tests rc $?" >> $OUT/cuda_tests_digitcaps.log
tail -3 $OUT/cuda_tests_digitcaps.log
./halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 \
  --implementations fused_split,fused_split_vectors,fused_split_vectors_c20 --repeats 30 --seed 201 \
  --json $OUT/digitcaps.json --markdown $OUT/digitcaps.md > $OUT/digitcaps.txt 2>&1
cat $OUT/digitcaps.txt
ncu --metrics gpu__time_duration.sum,launch__registers_per_thread,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active \
  ./halcaps bench --device cuda --op digitcaps --shapes mnist_b128 --implementations fused_split_vectors --repeats 1 --warmup 0 --seed 202 > $OUT/ncu_vectors.txt 2>&1
grep -E "_kernel|duration|registers|inst_executed|warps_active" $OUT/ncu_vectors.txt | head -80

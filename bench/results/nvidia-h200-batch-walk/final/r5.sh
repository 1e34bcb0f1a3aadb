#!/bin/bash
# Session 2026-11-22b, run 5 (results nvidia-h200-batch-walk/final): batch_walk with 8-byte stores (u_hat's start
# declared 8-byte aligned, its strides' parity in the fast path's condition), the forward's CUDA default where it fits.
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
$G/halcaps bench --device cuda --op predict --repeats 30 --seed 391 --json $OUT/predict.json --markdown $OUT/predict.md > $OUT/predict.txt 2>&1
cat $OUT/predict.txt
timeout 150 compute-sanitizer --tool memcheck $G/halcaps_cuda_tests "[odd],[grid],[device],[default]" > $OUT/memcheck.log 2>&1; echo "rc $?" >> $OUT/memcheck.log
grep -E "ERROR SUMMARY|rc |passed|failed" $OUT/memcheck.log
timeout 100 compute-sanitizer --tool racecheck $G/halcaps bench --device cuda --op predict --shapes mnist_b128,3:37:8:5:16 --implementations batch_walk --repeats 1 --warmup 0 --seed 392 > $OUT/racecheck.log 2>&1; echo "rc $?" >> $OUT/racecheck.log
grep -E "ERROR SUMMARY|RACECHECK|rc |batch_walk" $OUT/racecheck.log | head -6
ncu --metrics gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum \
  $G/halcaps bench --device cuda --op predict --shapes mnist_b128 --implementations batch_walk --repeats 1 --warmup 0 --seed 393 > $OUT/ncu.txt 2>&1
grep -A8 "_kernel_u_hat" $OUT/ncu.txt | grep -E "gpu__time|l1tex|dram|regis|warps" | tail -5

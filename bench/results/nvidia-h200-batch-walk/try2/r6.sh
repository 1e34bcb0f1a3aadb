#!/bin/bash
# Session 2026-11-22b, run 6 (results nvidia-h200-batch-walk/try2): batch_walk4 (4 e a thread, 16-byte stores,
# 8 x 16 threads each walking 8 rows) against batch_walk (2 e, 16 x 8 threads walking 16 rows).
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 200 compute-sanitizer --tool memcheck $G/halcaps_cuda_tests "[odd],[grid],[device],[default]" > $OUT/memcheck_tests.log 2>&1; echo "rc $?" >> $OUT/memcheck_tests.log
grep -E "ERROR SUMMARY|rc |passed|failed" $OUT/memcheck_tests.log
$G/halcaps bench --device cuda --op predict --shapes mnist_b128,mnist_b512 --implementations batch_vectors,batch_walk,batch_walk4,cuda_tuned --repeats 30 --seed 401 \
  --json $OUT/predict.json --markdown $OUT/predict.md > $OUT/predict.txt 2>&1
cat $OUT/predict.txt
ncu --metrics gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum \
  $G/halcaps bench --device cuda --op predict --shapes mnist_b128 --implementations batch_walk4 --repeats 1 --warmup 0 --seed 403 > $OUT/ncu.txt 2>&1
grep -A10 "_kernel_u_hat" $OUT/ncu.txt | grep -E "gpu__time|l1tex|dram|regis|warps" | tail -5

#!/bin/bash
# Session 2026-11-22b, run 3 (results run8): rows_predict with grad_u_hat a thread per (4 e, j, b) walking 32 capsules
# (grad_s and v loaded once a chunk); rows_walk = that plus the e sums (agreements, grad_c) a thread per (j, b) walking
# 16 capsules (the other factor's row loaded once a chunk).
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[digitcaps],[routing]" > $OUT/cuda_tests_digitcaps.log 2>&1; echo "rc $?" >> $OUT/cuda_tests_digitcaps.log
tail -3 $OUT/cuda_tests_digitcaps.log
for impl in rows_predict rows_walk; do
timeout 200 compute-sanitizer --tool memcheck $G/halcaps bench --device cuda --op digitcaps_backward --shapes 17:33:8:10:16,40:45:5:7:7,1:13:8:14:16,3:20:8:10:12,2:70:8:3:16,4:130:4:4:8 \
  --implementations $impl --repeats 1 --warmup 0 --seed 374 > $OUT/memcheck_$impl.log 2>&1; echo "rc $?" >> $OUT/memcheck_$impl.log
grep -E "ERROR SUMMARY|rc |rows_" $OUT/memcheck_$impl.log
done
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations fused_split_vectors --repeats 30 --seed 371 > $OUT/backward_rows.txt 2>&1
$G/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --implementations tiled_predict,rows_predict,rows_walk --repeats 30 --seed 372 \
  --json $OUT/backward_rows.json --markdown $OUT/backward_rows.md >> $OUT/backward_rows.txt 2>&1
cat $OUT/backward_rows.txt
ncu --metrics gpu__time_duration.sum,launch__registers_per_thread,l1tex__throughput.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed \
  $G/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128 --implementations rows_walk --repeats 1 --warmup 0 --seed 373 > $OUT/ncu_rows_walk.txt 2>&1

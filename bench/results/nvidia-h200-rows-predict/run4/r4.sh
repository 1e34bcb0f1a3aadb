#!/bin/bash
# Session 2026-11-22, run 4: rows_predict, chunks of 64 again (threads per (e, j, b)), grad_b0 unrolled by 8, pure (j, i, b) stages 4 batch elements a thread.
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[digitcaps]" > $OUT/cuda_tests_digitcaps.log 2>&1; echo "rc $?" >> $OUT/cuda_tests_digitcaps.log
tail -3 $OUT/cuda_tests_digitcaps.log
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations fused_split_vectors --repeats 30 --seed 331 > $OUT/backward_rows.txt 2>&1
$G/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --implementations tiled_predict,rows_predict --repeats 30 --seed 332 >> $OUT/backward_rows.txt 2>&1
cat $OUT/backward_rows.txt
ncu --metrics gpu__time_duration.sum,launch__registers_per_thread,l1tex__throughput.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed \
  $G/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128 --implementations rows_predict --repeats 1 --warmup 0 --seed 333 > $OUT/ncu_rows_predict.txt 2>&1
timeout 240 compute-sanitizer --tool memcheck $G/halcaps bench --device cuda --op digitcaps_backward --shapes 17:33:8:10:16,40:45:5:7:7,1:13:8:14:16,3:20:8:10:12,2:70:8:3:16 \
  --implementations rows_predict --repeats 1 --warmup 0 --seed 334 > $OUT/memcheck.log 2>&1; echo "rc $?" >> $OUT/memcheck.log
grep -E "ERROR SUMMARY|rc |rows_predict" $OUT/memcheck.log

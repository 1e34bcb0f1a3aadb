#!/bin/bash
# Session 2026-11-22b, run 1: rows_predict with the chunk sums' init and update in one kernel (register accumulator),
# the (e, j, b) stages one batch element a thread, the squash statistics and s . grad_v computed in v's and grad_s's
# threads, grad_v inlined; rows_softmax = that plus c and grad_logits a thread per (i, b) row.
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[digitcaps],[routing]" > $OUT/cuda_tests_digitcaps.log 2>&1; echo "rc $?" >> $OUT/cuda_tests_digitcaps.log
tail -3 $OUT/cuda_tests_digitcaps.log
for n in 1 2 3 4 5; do $G/halcaps_cuda_tests "cuda digitcaps: calls on device tensors without b0 or grad_b0 do not wait for the device" 2>&1 | tail -1; done > $OUT/no_wait_repeats.log
cat $OUT/no_wait_repeats.log
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations fused_split_vectors --repeats 30 --seed 351 > $OUT/backward_rows.txt 2>&1
$G/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --implementations tiled_predict,rows_predict,rows_softmax --repeats 30 --seed 352 \
  --json $OUT/backward_rows.json --markdown $OUT/backward_rows.md >> $OUT/backward_rows.txt 2>&1
cat $OUT/backward_rows.txt
for impl in rows_predict rows_softmax; do
ncu --metrics gpu__time_duration.sum,launch__registers_per_thread,l1tex__throughput.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed \
  $G/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128 --implementations $impl --repeats 1 --warmup 0 --seed 353 > $OUT/ncu_$impl.txt 2>&1
timeout 200 compute-sanitizer --tool memcheck $G/halcaps bench --device cuda --op digitcaps_backward --shapes 17:33:8:10:16,40:45:5:7:7,1:13:8:14:16,3:20:8:10:12,2:70:8:3:16 \
  --implementations $impl --repeats 1 --warmup 0 --seed 354 > $OUT/memcheck_$impl.log 2>&1; echo "rc $?" >> $OUT/memcheck_$impl.log
grep -E "ERROR SUMMARY|rc |rows_" $OUT/memcheck_$impl.log
done

#!/bin/bash
# Session 2026-11-22b, run 2 (results run7): the kept rows_predict (run 6's, with the generic-E chunk sums fixed: e split
# by 1 so that a thread's register holds its one e; run 6 trapped on a storage-bound check at E = 8), checks and timing.
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[digitcaps],[routing]" > $OUT/cuda_tests_digitcaps.log 2>&1; echo "rc $?" >> $OUT/cuda_tests_digitcaps.log
tail -3 $OUT/cuda_tests_digitcaps.log
for n in 1 2 3 4 5; do $G/halcaps_cuda_tests "cuda digitcaps: calls on device tensors without b0 or grad_b0 do not wait for the device" 2>&1 | tail -1; done > $OUT/no_wait_repeats.txt
cat $OUT/no_wait_repeats.txt
timeout 240 compute-sanitizer --tool memcheck $G/halcaps bench --device cuda --op digitcaps_backward --shapes 17:33:8:10:16,40:45:5:7:7,1:13:8:14:16,3:20:8:10:12,2:70:8:3:16,4:130:4:4:8 \
  --implementations rows_predict --repeats 1 --warmup 0 --seed 364 > $OUT/memcheck.log 2>&1; echo "rc $?" >> $OUT/memcheck.log
grep -E "ERROR SUMMARY|rc |rows_" $OUT/memcheck.log
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations fused_split_vectors --repeats 30 --seed 361 > $OUT/backward_rows.txt 2>&1
$G/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --implementations tiled_predict,rows_predict --repeats 30 --seed 362 \
  --json $OUT/backward_rows.json --markdown $OUT/backward_rows.md >> $OUT/backward_rows.txt 2>&1
cat $OUT/backward_rows.txt

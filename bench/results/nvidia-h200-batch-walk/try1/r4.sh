#!/bin/bash
# Session 2026-11-22b, run 4 (results run9 and nvidia-h200-batch-walk): rows_predict with the e sums a thread per (j, b)
# walking 16 capsules (grad_u_hat back to run 7's); the capsule prediction's new forward schedule batch_walk.
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
$G/halcaps bench --device cuda --op predict --repeats 30 --seed 381 --json $OUT/predict.json --markdown $OUT/predict.md > $OUT/predict.txt 2>&1
cat $OUT/predict.txt
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations fused_split_vectors --repeats 30 --seed 382 > $OUT/backward_rows.txt 2>&1
$G/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --implementations tiled_predict,rows_predict --repeats 30 --seed 383 \
  --json $OUT/backward_rows.json --markdown $OUT/backward_rows.md >> $OUT/backward_rows.txt 2>&1
cat $OUT/backward_rows.txt
timeout 150 compute-sanitizer --tool memcheck $G/halcaps bench --device cuda --op digitcaps_backward --shapes 17:33:8:10:16,40:45:5:7:7,1:13:8:14:16,3:20:8:10:12,2:70:8:3:16,4:130:4:4:8 \
  --implementations rows_predict --repeats 1 --warmup 0 --seed 384 > $OUT/memcheck_rows_predict.log 2>&1; echo "rc $?" >> $OUT/memcheck_rows_predict.log
grep -E "ERROR SUMMARY|rc " $OUT/memcheck_rows_predict.log
timeout 150 compute-sanitizer --tool memcheck $G/halcaps_cuda_tests "[odd],[grid],[device]" > $OUT/memcheck_predict.log 2>&1; echo "rc $?" >> $OUT/memcheck_predict.log
grep -E "ERROR SUMMARY|rc |passed|failed" $OUT/memcheck_predict.log
timeout 100 compute-sanitizer --tool racecheck $G/halcaps bench --device cuda --op predict --shapes mnist_b128 --implementations batch_walk --repeats 1 --warmup 0 --seed 385 > $OUT/racecheck_batch_walk.log 2>&1; echo "rc $?" >> $OUT/racecheck_batch_walk.log
grep -E "ERROR SUMMARY|RACE|rc " $OUT/racecheck_batch_walk.log | head -5
ncu --metrics gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum \
  $G/halcaps bench --device cuda --op predict --shapes mnist_b128 --implementations batch_walk,batch_vectors,cuda_tuned --repeats 1 --warmup 0 --seed 386 > $OUT/ncu_predict.txt 2>&1

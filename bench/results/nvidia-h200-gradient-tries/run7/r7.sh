#!/bin/bash
# Session 2026-11-22d, run 7: the final rows_vectors (both vectors gradients): every CUDA test, timing with the
# forward in the same call, memcheck and racecheck at odd shapes.
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
$G/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 \
  --implementations rows_predict,rows_vectors --repeats 30 --seed 471 --json $OUT/digitcaps_backward.json > $OUT/bench.txt 2>&1
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 \
  --implementations fused_split_all_vectors --repeats 30 --seed 471 >> $OUT/bench.txt 2>&1
cat $OUT/bench.txt
for tool in memcheck racecheck; do
  echo "== $tool digitcaps_backward rows_vectors" >> $OUT/sanitizer.log
  timeout 250 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op digitcaps_backward --implementations rows_vectors \
    --shapes 1:1:1:1:1,17:33:8:10:16,3:20:8:10:12,4:130:4:4:8,2:70:16:3:16 --repeats 1 --warmup 0 --seed 472 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
done
grep -E "^==|ERROR SUMMARY|RACECHECK SUMMARY|^rc |digitcaps_backward " $OUT/sanitizer.log | head -40

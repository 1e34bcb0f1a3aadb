#!/bin/bash
# Session 2026-11-22c, run 1: fused_split_all_vectors (logits kernels in batch vectors), checks and timing.
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[digitcaps],[routing]" > $OUT/cuda_tests_digitcaps.log 2>&1; echo "rc $?" >> $OUT/cuda_tests_digitcaps.log
tail -3 $OUT/cuda_tests_digitcaps.log
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 \
  --implementations fused_split_all_vectors,fused_split_all_vectors_i2,fused_split_all_vectors_i4,fused_split_vectors --repeats 30 --seed 401 \
  --json $OUT/digitcaps.json > $OUT/digitcaps.txt 2>&1
cat $OUT/digitcaps.txt
ncu --metrics gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active \
  $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 --implementations fused_split_all_vectors --repeats 1 --warmup 0 --seed 402 > $OUT/ncu.txt 2>&1
python3 $G/ncusum.py $OUT/ncu.txt -v 2>&1 | head -60
for shape in "-B 17 -I 33" "-B 40 -I 45 -J 7 --b0" "-B 1 -I 13 -J 24" "-B 128 -I 1152"; do
  echo "== memcheck digitcaps $shape" >> $OUT/sanitizer.log
  timeout 120 compute-sanitizer --tool memcheck $G/halcaps digitcaps --device cuda $shape --schedule fused_split_all_vectors --repeats 1 --warmup 0 --seed 403 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
done
for shape in "-B 40 -I 45 -J 7 --b0" "-B 128 -I 1152"; do
  echo "== racecheck digitcaps $shape" >> $OUT/sanitizer.log
  timeout 120 compute-sanitizer --tool racecheck $G/halcaps digitcaps --device cuda $shape --schedule fused_split_all_vectors --repeats 1 --warmup 0 --seed 404 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
done
grep -E "==|ERROR SUMMARY|RACECHECK SUMMARY|rc " $OUT/sanitizer.log

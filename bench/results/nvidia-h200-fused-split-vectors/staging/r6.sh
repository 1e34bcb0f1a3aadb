#!/bin/bash
# Session 2026-11-21b, run 6: u staged by threads over (k, capsule); W_by_k copied through shared memory.
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[digitcaps],[routing]" > $OUT/cuda_tests_digitcaps_routing.log 2>&1; echo "rc $?" >> $OUT/cuda_tests_digitcaps_routing.log
tail -3 $OUT/cuda_tests_digitcaps_routing.log
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 \
  --implementations fused_split_vectors,fused_split,fused,stage_per_kernel,cuda_naive --repeats 30 --seed 251 \
  --json $OUT/digitcaps.json --markdown $OUT/digitcaps.md > $OUT/digitcaps.txt 2>&1
cat $OUT/digitcaps.txt
$G/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --repeats 30 --seed 255 > $OUT/digitcaps_backward.txt 2>&1
cat $OUT/digitcaps_backward.txt
python3 bench/pytorch_digitcaps.py --shapes 128 512 --repeats 30 > $OUT/pytorch.txt 2>&1
grep -o '"implementation": "[a-z_]*", "us": [0-9.]*' $OUT/pytorch.txt
ncu --metrics gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active \
  $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 --implementations fused_split_vectors --repeats 1 --warmup 0 --seed 252 > $OUT/ncu_vectors.txt 2>&1
for shape in "-B 17 -I 33" "-B 40 -I 45 -J 7 --b0" "-B 1 -I 13 -J 14" "-B 128 -I 1152"; do
  echo "== memcheck digitcaps $shape" >> $OUT/memcheck.log
  timeout 150 compute-sanitizer --tool memcheck $G/halcaps digitcaps --device cuda $shape --schedule fused_split_vectors --repeats 1 --warmup 0 --seed 253 >> $OUT/memcheck.log 2>&1; echo "rc $?" >> $OUT/memcheck.log
done
grep -E "==|ERROR SUMMARY|rc " $OUT/memcheck.log
for shape in "-B 40 -I 45 -J 7 --b0" "-B 128 -I 1152"; do
  echo "== racecheck digitcaps $shape"
  timeout 150 compute-sanitizer --tool racecheck $G/halcaps digitcaps --device cuda $shape --schedule fused_split_vectors --repeats 1 --warmup 0 --seed 254 2>&1 | grep -E "RACECHECK SUMMARY|ERROR"; echo "rc ${PIPESTATUS[0]}"
done > $OUT/racecheck_summary.txt
cat $OUT/racecheck_summary.txt

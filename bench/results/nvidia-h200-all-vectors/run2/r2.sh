#!/bin/bash
# Session 2026-11-22c, run 2: fused_split_all_vectors as the CUDA default (u staging guarded at the last capsule tile),
# checks, timing against the other forwards and the PyTorch peers, the backward's ratio, sanitizers.
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[digitcaps],[routing]" > $OUT/cuda_tests_digitcaps_routing.log 2>&1; echo "rc $?" >> $OUT/cuda_tests_digitcaps_routing.log
tail -3 $OUT/cuda_tests_digitcaps_routing.log
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 \
  --implementations fused_split_all_vectors,fused_split_vectors,fused_split,fused,stage_per_kernel,cuda_naive --repeats 30 --seed 411 \
  --json $OUT/digitcaps.json --markdown $OUT/digitcaps.md > $OUT/digitcaps.txt 2>&1
cat $OUT/digitcaps.txt
python3 bench/pytorch_digitcaps.py --shapes 128 512 --repeats 30 > $OUT/pytorch.txt 2>&1
grep -o '"implementation": "[a-z_]*", "us": [0-9.]*' $OUT/pytorch.txt
$G/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --implementations rows_predict --repeats 30 --seed 412 > $OUT/backward.txt 2>&1
cat $OUT/backward.txt
for shape in "-B 17 -I 33" "-B 40 -I 45 -J 7 --b0" "-B 1 -I 13 -J 24" "-B 130 -I 37 -J 11 --b0" "-B 128 -I 1152"; do
  echo "== memcheck digitcaps $shape" >> $OUT/sanitizer.log
  timeout 100 compute-sanitizer --tool memcheck $G/halcaps digitcaps --device cuda $shape --repeats 1 --warmup 0 --seed 413 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
done
for shape in "-B 40 -I 45 -J 7 --b0" "-B 130 -I 37 -J 11 --b0"; do
  echo "== racecheck digitcaps $shape" >> $OUT/sanitizer.log
  timeout 100 compute-sanitizer --tool racecheck $G/halcaps digitcaps --device cuda $shape --repeats 1 --warmup 0 --seed 414 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
done
grep -E "==|ERROR SUMMARY|RACECHECK SUMMARY|rc |implementation|fused" $OUT/sanitizer.log

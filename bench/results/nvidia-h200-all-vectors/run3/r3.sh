#!/bin/bash
# Session 2026-11-22c, run 3: compute-sanitizer on fused_split_all_vectors after the u-staging fix (named explicitly:
# the CLI's own default is `fused`).
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
for shape in "-B 17 -I 33" "-B 3 -I 37" "-B 40 -I 45 -J 7 --b0" "-B 1 -I 13 -J 24" "-B 130 -I 37 -J 11 --b0" "-B 128 -I 1152"; do
  echo "== memcheck digitcaps $shape" >> $OUT/sanitizer.log
  timeout 100 compute-sanitizer --tool memcheck $G/halcaps digitcaps --device cuda $shape --schedule fused_split_all_vectors --repeats 1 --warmup 0 --seed 421 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
done
for shape in "-B 3 -I 37" "-B 40 -I 45 -J 7 --b0" "-B 130 -I 37 -J 11 --b0" "-B 128 -I 1152"; do
  echo "== racecheck digitcaps $shape" >> $OUT/sanitizer.log
  timeout 100 compute-sanitizer --tool racecheck $G/halcaps digitcaps --device cuda $shape --schedule fused_split_all_vectors --repeats 1 --warmup 0 --seed 422 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
done
for shape in "-B 3 -I 37" "-B 130 -I 37 -J 11 --b0"; do
  echo "== initcheck digitcaps $shape" >> $OUT/sanitizer.log
  timeout 100 compute-sanitizer --tool initcheck $G/halcaps digitcaps --device cuda $shape --schedule fused_split_all_vectors --repeats 1 --warmup 0 --seed 423 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
  echo "== synccheck digitcaps $shape" >> $OUT/sanitizer.log
  timeout 100 compute-sanitizer --tool synccheck $G/halcaps digitcaps --device cuda $shape --schedule fused_split_all_vectors --repeats 1 --warmup 0 --seed 424 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
done
grep -E "==|ERROR SUMMARY|RACECHECK SUMMARY|rc |fused" $OUT/sanitizer.log

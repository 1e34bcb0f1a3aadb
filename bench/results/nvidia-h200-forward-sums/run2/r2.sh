#!/bin/bash
# Session 2026-11-22e, run 2: fused_split_walk_e (partial sums a thread per (j, 2 batch elements) walking e)
# against fused_split_all_vectors; checks, ncu at the device's clocks, memcheck of the new variant.
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[digitcaps],[routing]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
for round in 1 2; do
  $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations fused_split_all_vectors,fused_split_walk_e \
    --repeats 30 --seed 51$round >> $OUT/bench.txt 2>&1
done
grep -E "fused" $OUT/bench.txt | grep -v "^#"
ncu --cache-control none --clock-control none --metrics gpu__time_duration.sum,launch__registers_per_thread,l1tex__throughput.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active \
  $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 --implementations fused_split_walk_e --repeats 1 --warmup 0 --seed 513 > $OUT/ncu_walk_e.txt 2>&1
python3 $G/kernels.py $OUT/ncu_walk_e.txt '_kernel_v_s0' > $OUT/ncu_walk_e_kernels.txt; cat $OUT/ncu_walk_e_kernels.txt
grep -A6 "pass1_s_intm_global_wrapper__0_s0" $OUT/ncu_walk_e.txt | head -8
for shape in "-B 17 -I 33" "-B 3 -I 37" "-B 40 -I 45 -J 7 --b0" "-B 130 -I 37 -J 10 --b0"; do
  echo "== memcheck digitcaps $shape" >> $OUT/sanitizer.log
  timeout 100 compute-sanitizer --tool memcheck $G/halcaps digitcaps --device cuda $shape --schedule fused_split_walk_e --repeats 1 --warmup 0 --seed 514 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
done
grep -E "==|ERROR SUMMARY|rc " $OUT/sanitizer.log

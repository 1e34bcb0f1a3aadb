#!/bin/bash
# Session 2026-11-22i, run 1: the hand-written fused DigitCaps forward (cuda_fused, reference/cuda version 2),
# built with a temporary hook (HALCAPS_TRY_WAVES: the pass kernel's chunk count times this; unset: one wave).
# Every CUDA test; compute-sanitizer (memcheck, racecheck, initcheck, synccheck) of cuda_fused at odd shapes;
# the layer forward (cuda_fused, the Halide default, cuda_naive); cuda_fused at 0.5, 2 and 3 waves; ncu of cuda_fused.
G=/tmp/bin; mkdir -p $G; for b in halcaps_try halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
for shape in 1:1:1:1:1 17:33:8:10:16 130:37:8:11:16 40:45:5:7:7 5:7:16:16:32 33:9:9:3:17 2:70:16:3:16; do
  for tool in memcheck racecheck initcheck synccheck; do
    echo "== $tool $shape" >> $OUT/sanitizer.log
    timeout 100 compute-sanitizer --tool $tool $G/halcaps_try bench --device cuda --op digitcaps \
      --implementations cuda_fused --shapes $shape --repeats 1 --warmup 0 --seed 901 >> $OUT/sanitizer.log 2>&1
    echo "rc $?" >> $OUT/sanitizer.log
  done
done
grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - - | awk '{print}' | sort | uniq -c | sort -rn | head -5
grep -E "WRONG|does not apply|error" $OUT/sanitizer.log | sort | uniq -c | head
$G/halcaps_try bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_fused,fused_split_all_vectors,cuda_naive \
  --repeats 30 --seed 902 --json $OUT/digitcaps.json > $OUT/bench.txt 2>&1
for w in 0.5 2 3; do
  echo "== waves $w" >> $OUT/bench.txt
  HALCAPS_TRY_WAVES=$w $G/halcaps_try bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_fused \
    --repeats 30 --seed 903 >> $OUT/bench.txt 2>&1
done
grep -E "^== |^digitcaps|copy" $OUT/bench.txt
ncu --metrics gpu__time_duration.sum,launch__registers_per_thread,launch__occupancy_limit_registers,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,launch__grid_size \
  $G/halcaps_try bench --device cuda --op digitcaps --shapes mnist_b128 --implementations cuda_fused --repeats 1 --warmup 0 --seed 904 > /tmp/ncu1.txt 2>&1
grep -E "fused|gpu__time|launch__|sm__|smsp__|l1tex" /tmp/ncu1.txt | grep -v "^==" | head -60 > $OUT/ncu_cuda_fused.txt
head -30 $OUT/ncu_cuda_fused.txt
ncu --section WarpStateStats --kernel-name regex:pass_kernel --launch-count 1 \
  $G/halcaps_try bench --device cuda --op digitcaps --shapes mnist_b128 --implementations cuda_fused --repeats 1 --warmup 0 --seed 905 > /tmp/ncu2.txt 2>&1
grep -vE "^==PROF==" /tmp/ncu2.txt | sed -n '/pass_kernel/,$p' > $OUT/ncu_cuda_fused_stalls.txt; tail -30 $OUT/ncu_cuda_fused_stalls.txt

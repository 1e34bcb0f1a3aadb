#!/bin/bash
# Session 2026-11-22i, run 2: cuda_fused after run 1's fixes (the staging of step s + kStages - 1, 4 stages),
# with 64 registers a thread (__maxnreg__), v_sum rows in shared memory, logits in base 2 padded to 4 with -inf,
# read as 16-byte vectors. Temporary hook HALCAPS_TRY_WAVES as in run 1. The digitcaps CUDA tests; memcheck,
# racecheck, initcheck and synccheck of cuda_fused at odd shapes; the layer forward (cuda_fused at 1 and 2 waves,
# the Halide default); ncu per kernel.
G=/tmp/bin; mkdir -p $G; for b in halcaps_try halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[digitcaps]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
for shape in 1:1:1:1:1 17:33:8:10:16 130:37:8:11:16 40:45:5:7:7 5:7:16:16:32 33:9:9:3:17 2:70:16:3:16 65:300:8:10:16; do
  for tool in memcheck racecheck initcheck synccheck; do
    echo "== $tool $shape" >> $OUT/sanitizer.log
    timeout 100 compute-sanitizer --tool $tool $G/halcaps_try bench --device cuda --op digitcaps \
      --implementations cuda_fused --shapes $shape --repeats 1 --warmup 0 --seed 911 >> $OUT/sanitizer.log 2>&1
    echo "rc $?" >> $OUT/sanitizer.log
  done
done
grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - - | awk '{$2=""; $3=""; print}' | sort | uniq -c
grep -E "WRONG|does not apply|rror:" $OUT/sanitizer.log | sort | uniq -c | head
for w in 1 2; do
  echo "== waves $w" >> $OUT/bench.txt
  HALCAPS_TRY_WAVES=$w $G/halcaps_try bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_fused,fused_split_all_vectors \
    --repeats 30 --seed 912 >> $OUT/bench.txt 2>&1
done
grep -E "^== |^digitcaps |copy" $OUT/bench.txt
ncu --metrics gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum \
  $G/halcaps_try bench --device cuda --op digitcaps --shapes mnist_b128 --implementations cuda_fused --repeats 1 --warmup 0 --seed 914 > /tmp/ncu1.txt 2>&1
python3 bench/results/nvidia-h200-forward-sums/run1/kernels.py /tmp/ncu1.txt 'squash_kernel' > $OUT/ncu_kernels.txt; cat $OUT/ncu_kernels.txt
grep -A7 "pass_kernel\|squash_kernel" /tmp/ncu1.txt | tail -16 > $OUT/ncu_metrics.txt; cat $OUT/ncu_metrics.txt

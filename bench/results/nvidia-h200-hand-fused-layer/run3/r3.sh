#!/bin/bash
# Session 2026-11-22i, run 3: cuda_fused with the occupancy query after the kernel is allowed its 55 KB of shared
# memory (run 2 planned from a query that saw 0 blocks: one block an SM), and the squash kernel's chunk loop with
# four sums in flight. The digitcaps CUDA tests; memcheck and racecheck at odd shapes; the layer forward
# (cuda_fused at 1 and 2 waves, the Halide default); ncu per kernel.
G=/tmp/bin; mkdir -p $G; for b in halcaps_try halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[digitcaps]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
for shape in 17:33:8:10:16 130:37:8:11:16 5:7:16:16:32 33:9:9:3:17 65:300:8:10:16; do
  for tool in memcheck racecheck; do
    echo "== $tool $shape" >> $OUT/sanitizer.log
    timeout 100 compute-sanitizer --tool $tool $G/halcaps_try bench --device cuda --op digitcaps \
      --implementations cuda_fused --shapes $shape --repeats 1 --warmup 0 --seed 921 >> $OUT/sanitizer.log 2>&1
    echo "rc $?" >> $OUT/sanitizer.log
  done
done
grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - - | awk '{$2=""; $3=""; print}' | sort | uniq -c
grep -E "WRONG|does not apply|rror:" $OUT/sanitizer.log | sort | uniq -c | head
for w in 1 2; do
  echo "== waves $w" >> $OUT/bench.txt
  HALCAPS_TRY_WAVES=$w $G/halcaps_try bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_fused,fused_split_all_vectors \
    --repeats 30 --seed 922 >> $OUT/bench.txt 2>&1
done
grep -E "^== |^digitcaps |copy" $OUT/bench.txt
ncu --metrics gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
  $G/halcaps_try bench --device cuda --op digitcaps --shapes mnist_b128 --implementations cuda_fused --repeats 1 --warmup 0 --seed 924 > /tmp/ncu1.txt 2>&1
grep -A12 "pass_kernel\|squash_kernel" /tmp/ncu1.txt | grep -v "^--\|Section\|-----\|Metric Name" | tail -40 > $OUT/ncu_metrics.txt; tail -20 $OUT/ncu_metrics.txt

#!/bin/bash
# Session 2026-11-22i, run 6: cuda_fused with two batch rows a thread on its fast path (E = 16, K = 8): each
# 16-byte broadcast of W feeds both rows (half the W reads an FMA), 96 registers, two blocks of 64 batch rows an
# SM. The digitcaps CUDA tests; memcheck, racecheck and initcheck at odd shapes (batch off 64); A/B against run 5's
# binary (.gpu/halcaps_r1.xz, one row a thread), alternating, two rounds; ncu per kernel and stall reasons.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_r1 halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[digitcaps]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
for shape in 1:1:8:1:16 33:37:8:11:16 130:45:8:10:16 65:300:8:10:16 40:45:5:7:7; do
  for tool in memcheck racecheck initcheck; do
    echo "== $tool $shape" >> $OUT/sanitizer.log
    timeout 100 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op digitcaps \
      --implementations cuda_fused --shapes $shape --repeats 1 --warmup 0 --seed 951 >> $OUT/sanitizer.log 2>&1
    echo "rc $?" >> $OUT/sanitizer.log
  done
done
grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - - | awk '{$2=""; $3=""; print}' | sort | uniq -c
for round in 1 2; do
  for bin in halcaps_r1 halcaps; do
    echo "== round $round $bin" >> $OUT/bench.txt
    $G/$bin bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_fused,fused_split_all_vectors \
      --repeats 30 --seed 95$((round + 1)) >> $OUT/bench.txt 2>&1
  done
done
grep -E "^== |^digitcaps |copy" $OUT/bench.txt
ncu --metrics gpu__time_duration.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size \
  $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 --implementations cuda_fused --repeats 1 --warmup 0 --seed 954 > /tmp/ncu1.txt 2>&1
grep -A9 "pass_kernel\|squash_kernel" /tmp/ncu1.txt | grep -v "^--\|Section\|-----\|Metric Name" | tail -14 > $OUT/ncu_metrics.txt; cat $OUT/ncu_metrics.txt
ncu --section WarpStateStats --page raw --kernel-name regex:pass_kernel --launch-skip 1 --launch-count 1 \
  $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 --implementations cuda_fused --repeats 1 --warmup 0 --seed 955 > /tmp/ncu2.txt 2>&1
grep -E "stall|warp_latency|pass_kernel" /tmp/ncu2.txt | grep -v "^==" | awk '/pass_kernel/ || ($NF+0 > 0.05)' > $OUT/ncu_stalls.txt; cut -c1-150 $OUT/ncu_stalls.txt

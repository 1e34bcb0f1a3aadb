#!/bin/bash
# Session 2026-11-22i, run 4: cuda_fused with b0[i, :] staged by cp.async beside W[i] (run 3 read it from global
# memory in every step, on the logits' path before the barrier). The digitcaps CUDA tests; memcheck and racecheck;
# the layer forward (cuda_fused, the Halide default); ncu: per-kernel metrics and the pass kernel's stall reasons.
G=/tmp/bin; mkdir -p $G; for b in halcaps_try halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[digitcaps]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
for shape in 17:33:8:10:16 5:7:16:16:32 65:300:8:10:16; do
  for tool in memcheck racecheck; do
    echo "== $tool $shape" >> $OUT/sanitizer.log
    timeout 100 compute-sanitizer --tool $tool $G/halcaps_try bench --device cuda --op digitcaps \
      --implementations cuda_fused --shapes $shape --repeats 1 --warmup 0 --seed 931 >> $OUT/sanitizer.log 2>&1
    echo "rc $?" >> $OUT/sanitizer.log
  done
done
grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - - | awk '{$2=""; $3=""; print}' | sort | uniq -c
$G/halcaps_try bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_fused,fused_split_all_vectors \
    --repeats 30 --seed 932 > $OUT/bench.txt 2>&1
grep -E "^== |^digitcaps |copy" $OUT/bench.txt
ncu --metrics gpu__time_duration.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active \
  $G/halcaps_try bench --device cuda --op digitcaps --shapes mnist_b128 --implementations cuda_fused --repeats 1 --warmup 0 --seed 934 > /tmp/ncu1.txt 2>&1
grep -A8 "pass_kernel\|squash_kernel" /tmp/ncu1.txt | grep -v "^--\|Section\|-----\|Metric Name" | tail -12 > $OUT/ncu_metrics.txt; cat $OUT/ncu_metrics.txt
ncu --section WarpStateStats --page raw --kernel-name regex:pass_kernel --launch-skip 1 --launch-count 1 \
  $G/halcaps_try bench --device cuda --op digitcaps --shapes mnist_b128 --implementations cuda_fused --repeats 1 --warmup 0 --seed 935 > /tmp/ncu2.txt 2>&1
grep -E "issue_stalled.*per_warp_active|warp_latency_per_inst_issued|pass_kernel" /tmp/ncu2.txt | grep -v "^==" | awk '$NF+0 > 0.05 || /pass_kernel/' > $OUT/ncu_stalls.txt; cat $OUT/ncu_stalls.txt

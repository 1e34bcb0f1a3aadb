#!/bin/bash
# Session 2026-11-22d, run 1: gradient variants (grad_W batch groups, grad_u lanes with W staged), checks and timing.
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[grid],[odd],[device]" > $OUT/cuda_tests_predict.log 2>&1; echo "rc $?" >> $OUT/cuda_tests_predict.log
tail -3 $OUT/cuda_tests_predict.log
$G/halcaps bench --device cuda --op predict_backward --shapes mnist_b128,mnist_b512,wide_b32 \
  --implementations tuned,try_gw8u4,try_gw8u2,try_gw4u4,try_gu_ws,try_gu_ws2,cuda_tuned,cuda_fused,cublas --repeats 30 --seed 421 \
  --json $OUT/predict_backward.json > $OUT/predict_backward.txt 2>&1
cat $OUT/predict_backward.txt
ncu --metrics gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed \
  $G/halcaps bench --device cuda --op predict_backward --shapes mnist_b128 --implementations tuned,try_gw8u4,try_gw8u2,try_gw4u4,try_gu_ws,try_gu_ws2 --repeats 1 --warmup 0 --seed 422 > $OUT/ncu.txt 2>&1
grep -E "^  _kernel|gpu__time|dram__|l1tex|registers|warps_active" $OUT/ncu.txt | head -150

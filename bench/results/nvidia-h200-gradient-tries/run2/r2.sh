#!/bin/bash
# Session 2026-11-22d, run 2: gradient variants with 16-byte loads (grad_W quads, grad_u row vectors), checks and timing.
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[grid],[odd],[device]" > $OUT/cuda_tests_predict.log 2>&1; echo "rc $?" >> $OUT/cuda_tests_predict.log
tail -3 $OUT/cuda_tests_predict.log
$G/halcaps bench --device cuda --op predict_backward --shapes mnist_b128,mnist_b512,wide_b32 \
  --implementations tuned,try_q128u4,try_q64u2,try_rv64,try_rv32,cuda_tuned,cuda_fused,cublas --repeats 30 --seed 431 \
  --json $OUT/predict_backward.json > $OUT/predict_backward.txt 2>&1
cat $OUT/predict_backward.txt
ncu --kernel-name regex:_kernel_grad --metrics gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed \
  $G/halcaps bench --device cuda --op predict_backward --shapes mnist_b128 --implementations tuned,try_q128u4,try_q64u2,try_rv64,try_rv32 --repeats 1 --warmup 0 --seed 432 > $OUT/ncu.txt 2>&1
grep -E "^  _kernel|gpu__time|dram__|l1tex|registers|warps_active" $OUT/ncu.txt | grep -A5 "_kernel_grad" | grep -v "^--" | awk '/_kernel/{k=$1" "$2" "$3" "$4} /gpu__time/{t=$NF} /l1tex/{l=$NF} /dram/{d=$NF} /warps_active/{w=$NF; print k, "us="t, "dram%="d, "l1%="l, "warps%="w}' > $OUT/ncu_kernels.txt; cat $OUT/ncu_kernels.txt

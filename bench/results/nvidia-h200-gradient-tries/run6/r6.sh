#!/bin/bash
# Session 2026-11-22d, run 6: grad_u with g rows staged batch innermost (try_gu_staged32/64) and the layer
# backward with both vectors gradients (try_rows_vectors_w, outputs' extents tied to the inputs'); checks, timing, ncu.
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[grid],[odd],[device],[default],[digitcaps]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
$G/halcaps bench --device cuda --op predict_backward --shapes mnist_b128,mnist_b512,wide_b32 \
  --implementations tuned,vectors,try_gu_staged32,try_gu_staged64,cuda_fused --repeats 30 --seed 461 > $OUT/bench.txt 2>&1
$G/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 \
  --implementations rows_predict,rows_vectors,try_rows_vectors_w --repeats 30 --seed 462 >> $OUT/bench.txt 2>&1
cat $OUT/bench.txt
ncu --kernel-name regex:_kernel_grad_u --metrics gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed \
  $G/halcaps bench --device cuda --op predict_backward --shapes mnist_b128 --implementations vectors,try_gu_staged32,try_gu_staged64 --repeats 1 --warmup 0 --seed 463 > $OUT/ncu.txt 2>&1
grep -E "^  _kernel|gpu__time|dram__|l1tex|registers|warps_active" $OUT/ncu.txt | grep -A5 "_kernel_grad" | grep -v "^--" | awk '/_kernel/{k=$1" "$2" "$3" "$4} /gpu__time/{t=$NF} /l1tex/{l=$NF} /dram/{d=$NF} /warps_active/{w=$NF; print k, "us="t, "dram%="d, "l1%="l, "warps%="w}' > $OUT/ncu_kernels.txt; cat $OUT/ncu_kernels.txt

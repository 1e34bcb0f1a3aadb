#!/bin/bash
# Session 2026-11-22e, run 1: forward group sums and squash sums in registers (no guarded unroll); A/B against
# the previous binary; realistic-clock ncu of the forward and the layer backward.
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
xz -dc $G/halcaps_old.xz > /tmp/halcaps_old && chmod +x /tmp/halcaps_old
$G/halcaps_cuda_tests "[digitcaps],[routing]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
for round in 1 2; do
  for bin in /tmp/halcaps_old $G/halcaps; do
    echo "== round $round $bin" >> $OUT/bench.txt
    $bin bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations fused_split_all_vectors,fused \
      --repeats 30 --seed 50$round >> $OUT/bench.txt 2>&1
  done
done
grep -E "==|fused" $OUT/bench.txt | grep -v "^#"
M=gpu__time_duration.sum
ncu --cache-control none --clock-control none --metrics $M $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 \
  --implementations fused_split_all_vectors --repeats 1 --warmup 0 --seed 503 > $OUT/ncu_forward.txt 2>&1
python3 $G/kernels.py $OUT/ncu_forward.txt '_kernel_v_s0' > $OUT/ncu_forward_kernels.txt; cat $OUT/ncu_forward_kernels.txt
ncu --cache-control none --clock-control none --metrics $M $G/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128 \
  --implementations rows_vectors --repeats 1 --warmup 0 --seed 504 > $OUT/ncu_backward.txt 2>&1
python3 $G/kernels.py $OUT/ncu_backward.txt '_kernel_grad_b0_s0' > $OUT/ncu_backward_kernels.txt; cat $OUT/ncu_backward_kernels.txt

#!/bin/bash
# Session 2026-11-22e, run 3: the layer backward's tries: u_hat by batch_walk (try_walk), + the logits inlined
# (try_walk_inline), + grad_u_hat 2 batch elements a thread (try_walk_inline_b2); checks; ncu at the device's clocks.
G="$(cd "$(dirname "$0")" && pwd)"; for b in halcaps halcaps_cuda_tests; do [ -f $G/$b.xz ] && xz -dc $G/$b.xz > /tmp/$b && chmod +x /tmp/$b; done; B=/tmp
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$B/halcaps_cuda_tests "[digitcaps],[routing]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
for round in 1 2; do
  $B/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 \
    --implementations rows_vectors,try_walk,try_walk_inline,try_walk_inline_b2 --repeats 30 --seed 52$round >> $OUT/bench.txt 2>&1
done
grep -E "rows_vectors|try_" $OUT/bench.txt | grep -v "^#"
ncu --cache-control none --clock-control none --metrics gpu__time_duration.sum $B/halcaps bench --device cuda --op digitcaps_backward \
  --shapes mnist_b128 --implementations try_walk_inline_b2 --repeats 1 --warmup 0 --seed 523 > $OUT/ncu_try.txt 2>&1
python3 $G/kernels.py $OUT/ncu_try.txt '_kernel_grad_b0_s0' > $OUT/ncu_try_kernels.txt; head -30 $OUT/ncu_try_kernels.txt

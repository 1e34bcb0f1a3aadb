#!/bin/bash
# Session 2026-11-22e, run 7: try_shift: the backward's grad_u_hat and pure (j, i, b) stages with their batch tiles
# shifted inwards (no guard a batch element) where the batch covers a tile; checks; memcheck; ncu at the device's clocks.
G="$(cd "$(dirname "$0")" && pwd)"; for b in halcaps halcaps_cuda_tests; do [ -f $G/$b.xz ] && xz -dc $G/$b.xz > /tmp/$b && chmod +x /tmp/$b; done; B=/tmp
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$B/halcaps_cuda_tests "[digitcaps],[routing]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
for round in 1 2; do
  $B/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --implementations rows_vectors,try_shift \
    --repeats 30 --seed 57$round >> $OUT/bench.txt 2>&1
done
grep -E "try_|rows_vectors" $OUT/bench.txt | grep -v "^#"
for shape in 1:1:1:1:1 3:20:8:10:12 17:33:8:10:16 130:37:8:11:16 40:45:5:7:7 9:13:8:10:16; do
  echo "== memcheck try_shift $shape" >> $OUT/sanitizer.log
  timeout 100 compute-sanitizer --tool memcheck $B/halcaps bench --device cuda --op digitcaps_backward --implementations try_shift \
    --shapes $shape --repeats 1 --warmup 0 --seed 573 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
done
grep -E "^== |ERROR SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - -
ncu --cache-control none --clock-control none --metrics gpu__time_duration.sum $B/halcaps bench --device cuda --op digitcaps_backward \
  --shapes mnist_b128 --implementations try_shift --repeats 1 --warmup 0 --seed 574 > $OUT/ncu_try.txt 2>&1
python3 $G/kernels.py $OUT/ncu_try.txt '_kernel_grad_b0_s0' > $OUT/ncu_try_kernels.txt; cat $OUT/ncu_try_kernels.txt

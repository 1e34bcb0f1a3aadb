#!/bin/bash
# Session 2026-11-22e, run 6: tries: the forward's v_sum inlined into the logits kernels (try_vinline: v[t] stored
# batch innermost instead), the backward's grad_b0 sum rolled (try_b0); checks; memcheck of try_vinline.
G="$(cd "$(dirname "$0")" && pwd)"; for b in halcaps halcaps_cuda_tests; do [ -f $G/$b.xz ] && xz -dc $G/$b.xz > /tmp/$b && chmod +x /tmp/$b; done; B=/tmp
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$B/halcaps_cuda_tests "[digitcaps],[routing]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
for round in 1 2; do
  $B/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations fused_split_all_vectors,try_vinline \
    --repeats 30 --seed 55$round >> $OUT/bench.txt 2>&1
  $B/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --implementations rows_vectors,try_b0 \
    --repeats 30 --seed 56$round >> $OUT/bench.txt 2>&1
done
grep -E "fused_split_all|try_|rows_vectors" $OUT/bench.txt | grep -v "^#"
for shape in 17:33:8:10:16 130:37:8:11:16 3:37:8:5:16 1:13:8:24:16; do
  echo "== memcheck try_vinline $shape" >> $OUT/sanitizer.log
  timeout 100 compute-sanitizer --tool memcheck $B/halcaps bench --device cuda --op digitcaps --implementations try_vinline \
    --shapes $shape --repeats 1 --warmup 0 --seed 563 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
done
grep -E "^== |ERROR SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - -

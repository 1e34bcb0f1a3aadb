#!/bin/bash
# Session 2026-11-22e, run 10: the forward's partial-sum groups: 4 and 16 groups instead of 8 (fused_split_try_g4,
# _g16), and the group sums inside the squash kernel (4 or 6 groups a batch element, fused_split_try_gsq4, _gsq6);
# checks; memcheck of the squash-kernel variants.
G="$(cd "$(dirname "$0")" && pwd)"; for b in halcaps halcaps_cuda_tests; do [ -f $G/$b.xz ] && xz -dc $G/$b.xz > /tmp/$b && chmod +x /tmp/$b; done; B=/tmp
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$B/halcaps_cuda_tests "[digitcaps]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
I=fused_split_all_vectors,fused_split_try_g4,fused_split_try_g16,fused_split_try_gsq4,fused_split_try_gsq6
for round in 1 2; do
  $B/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations $I --repeats 30 --seed 58$round >> $OUT/bench.txt 2>&1
done
grep -E "fused_split" $OUT/bench.txt | grep -v "^#"
for impl in fused_split_try_gsq4 fused_split_try_gsq6; do
  for shape in 17:33:8:10:16 3:37:8:5:16 130:37:8:11:16; do
    echo "== memcheck $impl $shape" >> $OUT/sanitizer.log
    timeout 60 compute-sanitizer --tool memcheck $B/halcaps bench --device cuda --op digitcaps --implementations $impl \
      --shapes $shape --repeats 1 --warmup 0 --seed 583 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
  done
done
grep -E "^== |ERROR SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - -

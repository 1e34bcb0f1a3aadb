#!/bin/bash
# Session 2026-11-22e, run 5: W's e clamped in the layer backward's prediction (the batch_walk u_hat's pair read one
# float past W at odd out_dim: run 4's memcheck); every CUDA test; memcheck and racecheck of the backward defaults at
# odd shapes, one process a shape; timing with the forward default in the same call; the CLI's default row.
G="$(cd "$(dirname "$0")" && pwd)"; for b in halcaps halcaps_cuda_tests; do [ -f $G/$b.xz ] && xz -dc $G/$b.xz > /tmp/$b && chmod +x /tmp/$b; done; B=/tmp
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$B/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
for impl in rows_vectors rows_predict; do
  for shape in 1:1:1:1:1 17:33:8:10:16 130:37:8:11:16 3:20:8:10:12 40:45:5:7:7 2:70:16:3:16 4:130:4:4:8; do
    tools="memcheck racecheck"; [ $impl = rows_predict ] && tools=memcheck
    for tool in $tools; do
      echo "== $tool $impl $shape" >> $OUT/sanitizer.log
      timeout 100 compute-sanitizer --tool $tool $B/halcaps bench --device cuda --op digitcaps_backward --implementations $impl \
        --shapes $shape --repeats 1 --warmup 0 --seed 541 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
    done
  done
done
grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - -
$B/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --implementations rows_predict,rows_vectors \
  --repeats 30 --seed 542 --json $OUT/digitcaps_backward.json > $OUT/bench.txt 2>&1
$B/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations fused_split_all_vectors \
  --repeats 30 --seed 542 >> $OUT/bench.txt 2>&1
grep -E "digitcaps" $OUT/bench.txt | grep -v "^#"
$B/halcaps digitcaps --device cuda --backward --repeats 10 > $OUT/cli_default.txt 2>&1; cat $OUT/cli_default.txt

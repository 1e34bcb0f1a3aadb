#!/bin/bash
# Session 2026-11-22h, run 5 of the session: the layer backward's u_hat by batch_rows instead of batch_walk
# (rows_vectors, both backward ops). The previous binary (.gpu/halcaps_old.xz, built at 97edbc8) and the new one
# alternating, two rounds; CUDA tests of the layer and routing; memcheck of the backward at odd shapes.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_old halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[digitcaps],[routing]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
for shape in 17:33:8:10:16 130:37:8:11:16 3:20:8:8:16 2:70:8:33:16 4:130:8:4:16; do
  echo "== memcheck $shape" >> $OUT/sanitizer.log
  timeout 120 compute-sanitizer --tool memcheck $G/halcaps bench --device cuda --op digitcaps_backward \
    --implementations rows_vectors --shapes $shape --repeats 1 --warmup 0 --seed 841 >> $OUT/sanitizer.log 2>&1
  echo "rc $?" >> $OUT/sanitizer.log
done
grep -E "^== |ERROR SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - -
for round in 1 2; do
  for bin in halcaps_old halcaps; do
    echo "== round $round $bin" >> $OUT/bench.txt
    $G/$bin bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --implementations rows_vectors \
      --repeats 30 --seed 84$((round + 2)) >> $OUT/bench.txt 2>&1
  done
done
grep -E "^== |^digitcaps|copy" $OUT/bench.txt

#!/bin/bash
# Session 2026-11-22f, run 2: the training pair, the backward's agreements as one pass (r.agreements) (digitcaps_with_s, digitcaps_backward_with_s). The CUDA tests of
# the layer and routing; memcheck of both at odd shapes, one process a shape; timing of the forward and backward
# defaults with and without s, one call of bench each (every row checked against the float64 reference first).
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[digitcaps],[routing]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
for shape in 1:1:8:1:16 17:33:8:10:16 130:37:8:11:16 3:20:8:10:12 40:45:5:7:7 2:70:16:3:16; do
  for op in digitcaps digitcaps_backward; do
    impl=fused_split_all_vectors,fused; [ $op = digitcaps_backward ] && impl=rows_vectors,rows_predict
    echo "== memcheck $op $shape" >> $OUT/sanitizer.log
    timeout 100 compute-sanitizer --tool memcheck $G/halcaps bench --device cuda --op $op --implementations $impl \
      --shapes $shape --repeats 1 --warmup 0 --seed 621 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
  done
done
grep -E "^== |ERROR SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - -
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations fused_split_all_vectors \
  --repeats 30 --seed 622 --json $OUT/forward.json > $OUT/bench.txt 2>&1
$G/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --implementations rows_vectors \
  --repeats 30 --seed 622 --json $OUT/backward.json >> $OUT/bench.txt 2>&1
grep -E "^digitcaps|copy" $OUT/bench.txt

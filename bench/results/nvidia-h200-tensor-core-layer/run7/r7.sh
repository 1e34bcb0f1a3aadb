#!/bin/bash
# Run 7: after the second review's mends (cuda_tensor's Args without the strides its Variant already fixes; one
# chunk-count helper for both fused layers' plans). The digitcaps CUDA tests; memcheck of cuda_tensor at two shapes;
# the two hand-written fused layers timed once more.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
$G/halcaps_cuda_tests "[digitcaps]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
for shape in 130:37:8:11:16 17:11:3:11:5; do
  timeout 100 compute-sanitizer --tool memcheck $G/halcaps bench --device cuda --op digitcaps --implementations cuda_tensor \
    --shapes $shape --repeats 1 --warmup 0 --seed 1031 2>&1 | grep "ERROR SUMMARY" | tee -a $OUT/sanitizer.log
done
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_tensor,cuda_fused \
  --repeats 30 --seed 1032 > $OUT/bench.txt 2>&1
grep -E "^digitcaps |copy" $OUT/bench.txt

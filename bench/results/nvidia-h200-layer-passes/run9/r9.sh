#!/bin/bash
# Run 9: after the second review's mends (the first-iteration pass no longer zeros the v_sum tile it never reads;
# aligned_to beside aligned16 in pointer_alignment.h). Every CUDA test; memcheck and racecheck of cuda_tensor at
# two shapes; the layer timed once more.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
for shape in 130:37:8:11:16 17:11:3:11:5; do
  for tool in memcheck racecheck; do
    timeout 100 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op digitcaps --implementations cuda_tensor \
      --shapes $shape --repeats 1 --warmup 0 --seed 2091 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY" | tee -a $OUT/sanitizer.log
  done
done
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_tensor,cuda_fused,fused_split_all_vectors \
  --repeats 30 --seed 2092 > $OUT/bench.txt 2>&1
grep -E "^digitcaps |copy" $OUT/bench.txt

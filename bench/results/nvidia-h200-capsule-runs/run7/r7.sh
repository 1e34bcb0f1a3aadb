#!/bin/bash
# Run 7: the binaries after the review (the row accumulators and the u row shared by batch_walk, batch_rows and the
# capsule runs as helpers, the generated kernels byte-identical to run 5's; the in_dim-16 default checks merged into
# the first [default] case). Every CUDA test; the forward defaults timed once more.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
$G/halcaps bench --device cuda --op predict --shapes mnist_b128,mnist_b512 \
  --implementations capsule_runs,batch_rows,cuda_staged --repeats 30 --seed 3701 > $OUT/predict.txt 2>&1
grep -hE "^predict |copy" $OUT/predict.txt

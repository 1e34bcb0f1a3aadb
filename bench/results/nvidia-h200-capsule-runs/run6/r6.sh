#!/bin/bash
# Run 6: the committed binaries: the runtime's forward default takes capsule_runs at in_dim 16 too (out_caps *
# out_dim <= 256, batch * in_dim <= 12288). Every CUDA test (the [default] ones cover the new choice); capsule_runs
# against batch_vectors and batch_rows once more at in_dim 16 and at MNIST b128.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
$G/halcaps bench --device cuda --op predict --shapes 128:1152:16:10:16,mnist_b128 \
  --implementations capsule_runs,batch_vectors,batch_rows --repeats 30 --seed 3601 > $OUT/predict.txt 2>&1
grep -hE "^predict |copy" $OUT/predict.txt

#!/bin/bash
# Run 7: the binaries at the session's last commit (the CPU schedules and the gradient checks' sensitivity
# allowance changed since run 5): every CUDA test, then the forward's fast implementations once more.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A20 FAILED $OUT/cuda_tests.log | head -40
$G/halcaps bench --device cuda --op predict --shapes mnist_b128,mnist_b512,wide_b32 \
  --implementations cuda_staged,cuda_tuned,batch_rows,batch_vectors --repeats 30 --seed 2241 > $OUT/predict.txt 2>&1
grep -E "^predict |copy" $OUT/predict.txt

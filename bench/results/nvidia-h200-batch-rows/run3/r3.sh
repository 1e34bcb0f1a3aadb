#!/bin/bash
# Session 2026-11-22h, run 4 of the session: the committed binaries (batch_rows the forward's CUDA default where it
# fits). The whole CUDA test suite; memcheck of the default tests (host tensors on and off alignment); every
# implementation of the prediction and its gradients on the standard shapes, as in bench/results/nvidia-h200.md.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
timeout 300 compute-sanitizer --tool memcheck $G/halcaps_cuda_tests "[default]" > $OUT/sanitizer.log 2>&1
echo "rc $?" >> $OUT/sanitizer.log; grep -E "ERROR SUMMARY|test cases|^rc" $OUT/sanitizer.log
$G/halcaps bench --device cuda --op predict --repeats 30 --seed 831 --json $OUT/predict.json \
  --markdown $OUT/predict.md > $OUT/predict.txt 2>&1
$G/halcaps bench --device cuda --op predict_backward --repeats 30 --seed 832 --json $OUT/predict_backward.json \
  > $OUT/predict_backward.txt 2>&1
grep -E "^predict|copy" $OUT/predict.txt $OUT/predict_backward.txt

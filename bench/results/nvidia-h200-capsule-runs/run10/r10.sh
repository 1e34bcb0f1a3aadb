#!/bin/bash
# Run 10: after the second review (cuda_staged and cuda_tuned share their row's FMAs as row_outputs, cuda_staged
# loads W and its u rows with the file's load_rows and load_smem_row: the SASS of the whole file is identical; the
# tests convert grad_v with finite_differences.h's to_double). Every CUDA test; the fast forwards once more.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
$G/halcaps bench --device cuda --op predict --shapes mnist_b128,mnist_b512 \
  --implementations capsule_runs,cuda_staged,cuda_tuned --repeats 30 --seed 4001 > $OUT/predict.txt 2>&1
grep -hE "^predict |copy" $OUT/predict.txt

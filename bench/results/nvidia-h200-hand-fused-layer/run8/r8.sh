#!/bin/bash
# Session 2026-11-22i, run 8: the committed binaries with one more test: cuda_fused on device tensors one float
# off a 16-byte boundary (u, W or both: the scalar path at in_dim 8, out_dim 16). The digitcaps CUDA tests, then
# that test under memcheck.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[digitcaps]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
compute-sanitizer --tool memcheck $G/halcaps_cuda_tests "cuda digitcaps: cuda_fused on device tensors off a 16-byte boundary" > $OUT/sanitizer.log 2>&1
echo "rc $?" >> $OUT/sanitizer.log; tail -4 $OUT/sanitizer.log

#!/bin/bash
# Run 4, call 2: every CUDA test (the whole halcaps_cuda_tests binary) with 5e7a3e1's binary.
G=/tmp/bin; mkdir -p $G; xz -dc .gpu/halcaps_cuda_tests.xz > $G/halcaps_cuda_tests && chmod +x $G/halcaps_cuda_tests
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 560 $G/halcaps_cuda_tests > $OUT/cuda_tests_all.log 2>&1; echo "rc $?" >> $OUT/cuda_tests_all.log
tail -3 $OUT/cuda_tests_all.log; grep -B3 -A12 FAILED $OUT/cuda_tests_all.log | head -40

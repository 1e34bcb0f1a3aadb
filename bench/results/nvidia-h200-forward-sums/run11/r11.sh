#!/bin/bash
# Session 2026-11-22e, run 11: after the review's mends (a shared test helper for 16-byte-aligned host storage; the
# backward's prediction schedules in one struct, PTX byte-identical): the CUDA tests that use them.
G="$(cd "$(dirname "$0")" && pwd)"; xz -dc $G/halcaps_cuda_tests.xz > /tmp/halcaps_cuda_tests && chmod +x /tmp/halcaps_cuda_tests
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
/tmp/halcaps_cuda_tests "[default],[digitcaps]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log

#!/bin/bash
# Session 2026-11-22d, run 8: every CUDA test after the review refactor (PTX unchanged; runtime alignment helper).
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -4 $OUT/cuda_tests.log

#!/bin/bash
# Session 2026-11-22c, run 5 (review): digitcaps()'s fallback order derived from cuda_default; the DigitCaps and routing CUDA tests.
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[digitcaps],[routing]" > $OUT/cuda_tests_digitcaps_routing.log 2>&1; echo "rc $?" >> $OUT/cuda_tests_digitcaps_routing.log
tail -4 $OUT/cuda_tests_digitcaps_routing.log

#!/bin/bash
# Session 2026-11-22d, run 5: every CUDA test with the final binaries (the default tests check which implementation ran).
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -4 $OUT/cuda_tests.log
$G/halcaps_cuda_tests "[default]" -s 2>&1 | grep -E "expected the default|passed|failed" | sort | uniq -c | head > $OUT/default_cases.txt
cat $OUT/default_cases.txt

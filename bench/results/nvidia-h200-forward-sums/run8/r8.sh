#!/bin/bash
# Session 2026-11-22e, run 8: the committed binaries (531483e): compute-sanitizer memcheck over the whole
# "[digitcaps]" CUDA test group (every forward and backward implementation at the grid, odd, hard and device shapes).
G="$(cd "$(dirname "$0")" && pwd)"; for b in halcaps halcaps_cuda_tests; do [ -f $G/$b.xz ] && xz -dc $G/$b.xz > /tmp/$b && chmod +x /tmp/$b; done; B=/tmp
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 560 compute-sanitizer --tool memcheck /tmp/halcaps_cuda_tests "[digitcaps]" > $OUT/memcheck_digitcaps.log 2>&1; echo "rc $?" >> $OUT/memcheck_digitcaps.log
grep -E "ERROR SUMMARY|test cases|assertions|^rc " $OUT/memcheck_digitcaps.log | tail -5

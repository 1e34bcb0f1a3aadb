#!/bin/bash
# Session 2026-11-22b, run 7: after the review refactor (root_rows serves the (j, i, b) stages, one mapping for the
# chunk sums' two branches: PTX byte-identical) and the unaligned-host-pointer error mapped to misaligned_pointer
# in the shared status mapping instead of a special refusal in predict().
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[default],[digitcaps],[routing]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -4 $OUT/cuda_tests.log

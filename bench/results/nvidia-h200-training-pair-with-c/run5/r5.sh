#!/usr/bin/env bash
# Run 5: the training pairs' tests after the review's refactor (one loop over
# their cases, one float64 trace helper in the reference). halcaps_cuda_tests
# in .gpu/.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-training-pair-with-c/run5}
mkdir -p "$out" /tmp/bin
xz -dc .gpu/halcaps_cuda_tests.xz > /tmp/bin/halcaps_cuda_tests; chmod +x /tmp/bin/halcaps_cuda_tests
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 120 /tmp/bin/halcaps_cuda_tests "cuda digitcaps: cuda_tensor's training pair*,cuda digitcaps: hard inputs*" -d yes \
    > "$out/tests.log" 2>&1
echo "rc $?" >> "$out/tests.log"; tail -4 "$out/tests.log"; grep -B3 -A14 FAILED "$out/tests.log" | head -40

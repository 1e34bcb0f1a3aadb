#!/usr/bin/env bash
# Run 9: the squash's gradient written once (squash_slopes, both hand-written
# backward versions' row kernels; the same double arithmetic), checked by the
# hand_backward tests (.gpu/halcaps_cuda_tests.xz at the commit).
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-tensor-backward/run9}
mkdir -p "$out" /tmp/bin
xz -dc .gpu/halcaps_cuda_tests.xz > /tmp/bin/halcaps_cuda_tests; chmod +x /tmp/bin/halcaps_cuda_tests
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 170 /tmp/bin/halcaps_cuda_tests "[hand_backward]" > "$out/hand_backward_tests.log" 2>&1
echo "rc $?" >> "$out/hand_backward_tests.log"
tail -3 "$out/hand_backward_tests.log"; grep -B5 -A25 FAILED "$out/hand_backward_tests.log" | head -60

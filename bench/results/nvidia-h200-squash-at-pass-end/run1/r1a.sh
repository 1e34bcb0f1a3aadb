#!/usr/bin/env bash
# Run 1a: the forward passes after the first squash their own sums at their
# end (a barrier over each batch tile's blocks): the CUDA tests that cover the layer
# and both training pairs, then the four sanitizers on the pairs' tests and
# the MNIST-shape tests.
# Binary in .gpu/: halcaps_cuda_tests.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-squash-at-pass-end/run1}
mkdir -p "$out" /tmp/bin
xz -dc .gpu/halcaps_cuda_tests.xz > /tmp/bin/halcaps_cuda_tests; chmod +x /tmp/bin/halcaps_cuda_tests
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 240 /tmp/bin/halcaps_cuda_tests "[hand_backward],cuda digitcaps: cuda_tensor's training pair*,cuda digitcaps: blog grid*,cuda digitcaps: odd sizes*,cuda digitcaps: MNIST shape*,cuda digitcaps: cuda_tensor's MNIST variant*,cuda digitcaps: the hand-written fused layers*,cuda digitcaps: hard inputs*,cuda digitcaps: the hand-written backward*" \
    -d yes > "$out/tests.log" 2>&1
echo "rc $?" >> "$out/tests.log"; tail -4 "$out/tests.log"; grep -B3 -A14 FAILED "$out/tests.log" | head -40
SANITIZER_LOG_DIR=/tmp/sanitizer timeout 250 bash scripts/sanitize-gpu-tests.sh /tmp/bin/halcaps_cuda_tests \
    "cuda digitcaps: cuda_tensor's training pair*,cuda digitcaps: MNIST shape*" > "$out/sanitizer.txt" 2>&1
echo "rc $?" >> "$out/sanitizer.txt"; tail -8 "$out/sanitizer.txt"

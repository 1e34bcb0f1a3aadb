#!/usr/bin/env bash
# Run 1: the batch-split probe (bench/digitcaps_batch_split.cu) at MNIST b128
# and b512, then the GPU checks of aaa5375 (the review of the training pair
# keeping c, not yet run on a GPU): the tests that cover the pairs and the
# layer, and the four sanitizers on the pair keeping c. Binaries in .gpu/
# (halcaps_digitcaps_batch_split, halcaps_cuda_tests).
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-batch-split/run1}
mkdir -p "$out" /tmp/bin
for name in halcaps_digitcaps_batch_split halcaps_cuda_tests; do
    xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"
done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 120 /tmp/bin/halcaps_digitcaps_batch_split 128 512 > "$out/split.txt" 2>&1
echo "rc $?" >> "$out/split.txt"; cat "$out/split.txt"
timeout 240 /tmp/bin/halcaps_cuda_tests "[hand_backward],cuda digitcaps: cuda_tensor's training pair*,cuda digitcaps: blog grid*,cuda digitcaps: odd sizes*,cuda digitcaps: MNIST shape*,cuda digitcaps: cuda_tensor's MNIST variant*,cuda digitcaps: the hand-written fused layers*,cuda digitcaps: hard inputs*" \
    -d yes > "$out/tests.log" 2>&1
echo "rc $?" >> "$out/tests.log"; tail -4 "$out/tests.log"; grep -B3 -A14 FAILED "$out/tests.log" | head -40
SANITIZER_LOG_DIR=/tmp/sanitizer timeout 150 bash scripts/sanitize-gpu-tests.sh /tmp/bin/halcaps_cuda_tests \
    "cuda digitcaps: cuda_tensor's training pair keeping c*" > "$out/sanitizer.txt" 2>&1
echo "rc $?" >> "$out/sanitizer.txt"; tail -8 "$out/sanitizer.txt"

#!/usr/bin/env bash
# Run 4: the committed code (B dropped, softmax_row kept): the CUDA tests that
# cover the layer and both training pairs, and the probe at MNIST b128 and
# b512.
# Binaries in .gpu/: halcaps_cuda_tests, halcaps_digitcaps_timeline.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-timeline/run4}
mkdir -p "$out" /tmp/bin
for name in halcaps_cuda_tests halcaps_digitcaps_timeline; do
    xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"
done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 240 /tmp/bin/halcaps_cuda_tests "[hand_backward],cuda digitcaps: cuda_tensor's training pair*,cuda digitcaps: blog grid*,cuda digitcaps: odd sizes*,cuda digitcaps: MNIST shape*,cuda digitcaps: cuda_tensor's MNIST variant*,cuda digitcaps: the hand-written fused layers*,cuda digitcaps: hard inputs*,cuda digitcaps: the hand-written backward*" \
    -d yes > "$out/tests.log" 2>&1
echo "rc $?" >> "$out/tests.log"; tail -4 "$out/tests.log"; grep -B3 -A14 FAILED "$out/tests.log" | head -40
timeout 60 /tmp/bin/halcaps_digitcaps_timeline 128 512 > "$out/probe.txt" 2>&1
echo "rc $?" >> "$out/probe.txt"; cat "$out/probe.txt"

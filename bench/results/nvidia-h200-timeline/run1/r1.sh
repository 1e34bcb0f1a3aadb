#!/usr/bin/env bash
# Run 1: the forward's timeline (bench/digitcaps_timeline.cu) at four batch
# sizes, after the tests that cover the layer (the library's files changed:
# the squash kernel's marks, empty outside the probe).
# Binaries in .gpu/ (halcaps_cuda_tests, halcaps_digitcaps_timeline).
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-timeline/run1}
mkdir -p "$out" /tmp/bin
for name in halcaps_cuda_tests halcaps_digitcaps_timeline; do
    xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"
done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 240 /tmp/bin/halcaps_cuda_tests "[hand_backward],cuda digitcaps: cuda_tensor's training pair*,cuda digitcaps: blog grid*,cuda digitcaps: odd sizes*,cuda digitcaps: MNIST shape*,cuda digitcaps: cuda_tensor's MNIST variant*,cuda digitcaps: the hand-written fused layers*,cuda digitcaps: hard inputs*,cuda digitcaps: the hand-written backward*" \
    -d yes > "$out/tests.log" 2>&1
echo "rc $?" >> "$out/tests.log"; tail -4 "$out/tests.log"; grep -B3 -A14 FAILED "$out/tests.log" | head -40
mkdir -p /tmp/csv
timeout 120 /tmp/bin/halcaps_digitcaps_timeline --csv /tmp/csv/timeline 32 128 256 512 > "$out/timeline.txt" 2>&1
echo "rc $?" >> "$out/timeline.txt"; cat "$out/timeline.txt"
tar -C /tmp/csv -cJf "$out/timeline_csv.tar.xz" .

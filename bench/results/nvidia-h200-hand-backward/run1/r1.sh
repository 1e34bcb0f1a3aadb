#!/usr/bin/env bash
# Run 1 of the hand-written backward (cuda_naive, cuda_passes) on the GPU
# machine, from the repository root, with .gpu/halcaps.xz and
# .gpu/halcaps_cuda_tests.xz built at this run's commit: the new tests, every
# DigitCaps test, one bench of the layer's backward at MNIST b128 and b512
# (every implementation), and the PyTorch peers of the gradients.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-hand-backward/run1}
mkdir -p "$out" /tmp/bin
for name in halcaps halcaps_cuda_tests; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 120 /tmp/bin/halcaps_cuda_tests "[hand_backward]" > "$out/hand_backward_tests.log" 2>&1; echo "rc $?" >> "$out/hand_backward_tests.log"
tail -4 "$out/hand_backward_tests.log"
timeout 200 /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --repeats 30 \
    --seed 2811 --json "$out/bench.json" --markdown "$out/bench.md" > "$out/bench.txt" 2>&1; echo "rc $?" >> "$out/bench.txt"
cat "$out/bench.txt"
timeout 150 python3 bench/pytorch_digitcaps.py --shapes 128 512 --repeats 30 --backward > "$out/pytorch.txt" 2>&1
cat "$out/pytorch.txt"
timeout 220 /tmp/bin/halcaps_cuda_tests "[digitcaps]" > "$out/digitcaps_tests.log" 2>&1; echo "rc $?" >> "$out/digitcaps_tests.log"
tail -4 "$out/digitcaps_tests.log"

#!/usr/bin/env bash
# Run 10: after the layer's two versions were put behind one wrapper
# (2c09d93, no kernel changed): the hand_backward tests, the DigitCaps test
# cases that run every backward implementation on device tensors and at the
# MNIST shape, and one bench of the layer's backward.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-hand-backward/run10}
mkdir -p "$out" /tmp/bin
for name in halcaps halcaps_cuda_tests; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 150 /tmp/bin/halcaps_cuda_tests "[hand_backward],cuda digitcaps: device tensors on the caller's stream,cuda digitcaps: calls on device tensors without b0 or grad_b0 do not wait for the device,cuda digitcaps: MNIST shape*" \
    > "$out/tests.log" 2>&1; echo "rc $?" >> "$out/tests.log"
tail -3 "$out/tests.log"
timeout 60 /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --repeats 30 \
    --implementations cuda_passes,rows_vectors,cuda_naive --seed 2822 > "$out/bench.txt" 2>&1; echo "rc $?" >> "$out/bench.txt"
cat "$out/bench.txt"

#!/usr/bin/env bash
# Run 2a: run 2's candidate (the pieces' offsets taken once a kernel) with
# its tests: the tests that cover the layer and both training pairs, then the
# four sanitizers on both pairs' tests, then one bench of each op.
# Binaries in .gpu/ (halcaps, halcaps_cuda_tests).
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-coefficient-tiles/run2}
mkdir -p "$out" /tmp/bin
for name in halcaps halcaps_cuda_tests; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 240 /tmp/bin/halcaps_cuda_tests "[hand_backward],cuda digitcaps: cuda_tensor's training pair*,cuda digitcaps: blog grid*,cuda digitcaps: odd sizes*,cuda digitcaps: MNIST shape*,cuda digitcaps: cuda_tensor's MNIST variant*,cuda digitcaps: the hand-written fused layers*,cuda digitcaps: hard inputs*,cuda digitcaps: the hand-written backward*" \
    -d yes > "$out/tests.log" 2>&1
echo "rc $?" >> "$out/tests.log"; tail -4 "$out/tests.log"; grep -B3 -A14 FAILED "$out/tests.log" | head -40
SANITIZER_LOG_DIR=/tmp/sanitizer timeout 200 bash scripts/sanitize-gpu-tests.sh /tmp/bin/halcaps_cuda_tests \
    "cuda digitcaps: cuda_tensor's training pair*" > "$out/sanitizer.txt" 2>&1
echo "rc $?" >> "$out/sanitizer.txt"; tail -8 "$out/sanitizer.txt"
for op in digitcaps digitcaps_backward; do
    timeout 60 /tmp/bin/halcaps bench --device cuda --op $op --shapes mnist_b128,mnist_b512 --repeats 30 \
        --implementations cuda_tensor --seed 2801 > "$out/bench_$op.txt" 2>&1
    echo "rc $?" >> "$out/bench_$op.txt"; grep -E "^digitcaps|rc " "$out/bench_$op.txt" | cut -c1-110
done

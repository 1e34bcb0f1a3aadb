#!/usr/bin/env bash
# Run 4: the closing run, with digitcaps_backward_with_c's scratch holding no
# c of its own (18 MB less at MNIST b128). Binaries in .gpu/ (halcaps,
# halcaps_cuda_tests). The forward and backward benches first (every row
# validated before it is timed), two rounds; then the tests that cover the
# pair (hand_backward, the grid, odd sizes, the MNIST variant, the fused
# layers' limits, hard inputs) and the sanitizers on the pair's own test.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-training-pair-with-c/run4}
mkdir -p "$out" /tmp/bin
for name in halcaps halcaps_cuda_tests; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
for round in 1; do
    for op in digitcaps digitcaps_backward; do
        timeout 40 /tmp/bin/halcaps bench --device cuda --op $op --shapes mnist_b128,mnist_b512 --repeats 30 \
            --implementations cuda_tensor --seed $((2970 + round)) > "$out/bench_${op}_r$round.txt" 2>&1
        echo "rc $?" >> "$out/bench_${op}_r$round.txt"
        grep -E "^digitcaps|rc " "$out/bench_${op}_r$round.txt" | cut -c1-150
    done
done
timeout 200 /tmp/bin/halcaps_cuda_tests "[hand_backward],cuda digitcaps: blog grid*,cuda digitcaps: odd sizes*,cuda digitcaps: cuda_tensor's MNIST variant*,cuda digitcaps: the hand-written fused layers*,cuda digitcaps: hard inputs*" \
    -d yes > "$out/tests.log" 2>&1
echo "rc $?" >> "$out/tests.log"; tail -4 "$out/tests.log"; grep -B3 -A14 FAILED "$out/tests.log" | head -40
SANITIZER_LOG_DIR=/tmp/sanitizer timeout 90 bash scripts/sanitize-gpu-tests.sh /tmp/bin/halcaps_cuda_tests \
    "cuda digitcaps: cuda_tensor's training pair keeping c*" > "$out/sanitizer.txt" 2>&1
echo "rc $?" >> "$out/sanitizer.txt"; tail -8 "$out/sanitizer.txt"

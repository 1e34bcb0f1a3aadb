#!/usr/bin/env bash
# Run 9, the closing run of the hand-written backward at this commit's
# build (.gpu/halcaps.xz, .gpu/halcaps_cuda_tests.xz): every DigitCaps test;
# every implementation of the layer's backward and its forward in one bench
# at MNIST b128 and b512; the PyTorch peers of both; the hand_backward tests
# under compute-sanitizer's four tools.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-hand-backward/run9}
mkdir -p "$out" /tmp/bin
for name in halcaps halcaps_cuda_tests; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 200 /tmp/bin/halcaps_cuda_tests "[digitcaps]" > "$out/digitcaps_tests.log" 2>&1; echo "rc $?" >> "$out/digitcaps_tests.log"
tail -3 "$out/digitcaps_tests.log"
timeout 120 /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --repeats 30 \
    --seed 2820 --json "$out/bench_backward.json" --markdown "$out/bench_backward.md" > "$out/bench_backward.txt" 2>&1
echo "rc $?" >> "$out/bench_backward.txt"; cat "$out/bench_backward.txt"
timeout 60 /tmp/bin/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --repeats 30 \
    --implementations cuda_tensor,fused_split_all_vectors,cuda_naive --seed 2821 > "$out/bench_forward.txt" 2>&1
echo "rc $?" >> "$out/bench_forward.txt"; cat "$out/bench_forward.txt"
timeout 120 python3 bench/pytorch_digitcaps.py --shapes 128 512 --repeats 30 --backward > "$out/pytorch.txt" 2>&1
grep -v Warn "$out/pytorch.txt" | cut -c1-220
SANITIZER_LOG_DIR=/tmp/sanitizer timeout 150 bash scripts/sanitize-gpu-tests.sh /tmp/bin/halcaps_cuda_tests "[hand_backward]" \
    > "$out/sanitizer.txt" 2>&1; echo "rc $?" >> "$out/sanitizer.txt"; cat "$out/sanitizer.txt"

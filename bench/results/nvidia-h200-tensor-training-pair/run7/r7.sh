#!/usr/bin/env bash
# Run 7, the closing run at this build (.gpu/halcaps.xz,
# .gpu/halcaps_cuda_tests.xz, built on the build machine): every DigitCaps
# CUDA test (grad_b0 now also left out in the hand-written backward tests);
# the training-pair test under compute-sanitizer's four tools; the forward
# and backward ops, plain and with s, at MNIST b128 and b512 (cuda_tensor and
# the Halide defaults).
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-tensor-training-pair/run7}
mkdir -p "$out" /tmp/bin
for name in halcaps halcaps_cuda_tests; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 450 /tmp/bin/halcaps_cuda_tests "[digitcaps]" -d yes > "$out/digitcaps_tests.log" 2>&1
echo "rc $?" >> "$out/digitcaps_tests.log"
tail -3 "$out/digitcaps_tests.log"; grep -B5 -A25 FAILED "$out/digitcaps_tests.log" | head -80
timeout 100 /tmp/bin/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --repeats 30 \
    --implementations cuda_tensor,fused_split_all_vectors --seed 2951 --json "$out/bench_forward.json" > "$out/bench_forward.txt" 2>&1
echo "rc $?" >> "$out/bench_forward.txt"; grep -E "^digitcaps|rc " "$out/bench_forward.txt" | cut -c1-150
timeout 120 /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --repeats 30 \
    --implementations cuda_tensor,rows_vectors --seed 2952 --json "$out/bench_backward.json" --markdown "$out/bench_backward.md" > "$out/bench_backward.txt" 2>&1
echo "rc $?" >> "$out/bench_backward.txt"; grep -E "^digitcaps|rc " "$out/bench_backward.txt" | cut -c1-150
SANITIZER_LOG_DIR=/tmp/sanitizer timeout 120 bash scripts/sanitize-gpu-tests.sh /tmp/bin/halcaps_cuda_tests \
    "cuda digitcaps: cuda_tensor's training pair*" > "$out/sanitizer.txt" 2>&1
echo "rc $?" >> "$out/sanitizer.txt"; tail -8 "$out/sanitizer.txt"

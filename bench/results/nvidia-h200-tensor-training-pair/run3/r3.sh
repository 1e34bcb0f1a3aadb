#!/usr/bin/env bash
# Run 3: run 1 again after its fix (the logits' shuffle had moved inside a
# select, so lanes past out_caps skipped it: the agreement pass hung where
# out_caps is below its register rows, and was slower at MNIST). Binaries in
# .gpu/ (halcaps.xz, halcaps_cuda_tests.xz, built on the build machine):
# every DigitCaps CUDA test (durations kept), then the forward and backward
# ops, plain and with s, at MNIST b128 and b512.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-tensor-training-pair/run3}
mkdir -p "$out" /tmp/bin
for name in halcaps halcaps_cuda_tests; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 450 /tmp/bin/halcaps_cuda_tests "[digitcaps]" -d yes > "$out/digitcaps_tests.log" 2>&1
echo "rc $?" >> "$out/digitcaps_tests.log"
tail -3 "$out/digitcaps_tests.log"; grep -B5 -A25 FAILED "$out/digitcaps_tests.log" | head -80
timeout 100 /tmp/bin/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --repeats 30 \
    --implementations cuda_tensor,fused_split_all_vectors --seed 2911 > "$out/bench_forward.txt" 2>&1
echo "rc $?" >> "$out/bench_forward.txt"; grep -E "^digitcaps|rc " "$out/bench_forward.txt" | cut -c1-150
timeout 120 /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --repeats 30 \
    --implementations cuda_tensor,rows_vectors --seed 2912 > "$out/bench_backward.txt" 2>&1
echo "rc $?" >> "$out/bench_backward.txt"; grep -E "^digitcaps|rc " "$out/bench_backward.txt" | cut -c1-150

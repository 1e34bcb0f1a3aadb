#!/usr/bin/env bash
# Run 10, after the review's refactor (the base-2 softmax shared by the
# tensor-core passes and first_coefficients, one refusal-status helper in the
# runtime): the hand_backward tests, the hand-written layers' limits test,
# the forward and backward cuda_tensor at MNIST b128 and b512.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-tensor-backward/run10}
mkdir -p "$out" /tmp/bin
for name in halcaps halcaps_cuda_tests; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 120 /tmp/bin/halcaps_cuda_tests "[hand_backward]" > "$out/hand_backward_tests.log" 2>&1
echo "rc $?" >> "$out/hand_backward_tests.log"; tail -3 "$out/hand_backward_tests.log"
timeout 60 /tmp/bin/halcaps_cuda_tests "cuda digitcaps: the hand-written fused layers at their limits*" \
    > "$out/limits_tests.log" 2>&1
echo "rc $?" >> "$out/limits_tests.log"; tail -3 "$out/limits_tests.log"
for op in digitcaps digitcaps_backward; do
    timeout 60 /tmp/bin/halcaps bench --device cuda --op $op --shapes mnist_b128,mnist_b512 --repeats 30 \
        --implementations cuda_tensor --seed 2850 > "$out/bench_$op.txt" 2>&1
    echo "rc $?" >> "$out/bench_$op.txt"; grep -E "^$op |rc " "$out/bench_$op.txt" | cut -c1-120
done

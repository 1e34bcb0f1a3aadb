#!/usr/bin/env bash
# Run 1 of the gradients from the routing trace (branch fused-gradients,
# rebased on 69f624b). Binaries in .gpu/ (halcaps, halcaps_cuda_tests, built
# from the branch). The candidate's bench first (its rows are validated
# before they are timed), then every CUDA test but the capsule
# convolution's and the autoschedulers' (the prediction's tensor-core
# gradients moved into tensor_core_gradients.cuh, so its tests run too),
# then the sanitizers on the training pair and the hand-written backward.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-gradients-from-trace/run1}
mkdir -p "$out" /tmp/bin
for name in halcaps halcaps_cuda_tests; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
for op in digitcaps_backward predict_backward; do
    timeout 40 /tmp/bin/halcaps bench --device cuda --op $op --shapes mnist_b128,mnist_b512 --repeats 30 \
        --implementations cuda_tensor --seed 2962 > "$out/bench_$op.txt" 2>&1
    echo "rc $?" >> "$out/bench_$op.txt"; grep -E "^(digitcaps|predict)|rc " "$out/bench_$op.txt" | cut -c1-150
done
timeout 330 /tmp/bin/halcaps_cuda_tests "[cuda]~[capsconv]~[capsconv_hand]~[autosched]" -d yes > "$out/tests.log" 2>&1
echo "rc $?" >> "$out/tests.log"; tail -4 "$out/tests.log"; grep -B3 -A14 FAILED "$out/tests.log" | head -40
SANITIZER_LOG_DIR=/tmp/sanitizer timeout 150 bash scripts/sanitize-gpu-tests.sh /tmp/bin/halcaps_cuda_tests \
    "cuda digitcaps: cuda_tensor's training pair*,cuda digitcaps: the hand-written backward at odd sizes*" > "$out/sanitizer.txt" 2>&1
echo "rc $?" >> "$out/sanitizer.txt"; tail -8 "$out/sanitizer.txt"

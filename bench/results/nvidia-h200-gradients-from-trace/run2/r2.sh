#!/usr/bin/env bash
# Run 2: the block-shared g tiles (branch shared-basis). Binaries in .gpu/
# (halcaps, halcaps_cuda_tests). The backward bench first (validated rows),
# ncu on the new kernel at MNIST b128, then the tests run 8 of the training
# pair ran (hand_backward, grid, odd sizes, the MNIST variant, the fused
# layers' limits, hard inputs) and the sanitizers on the training pair.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-gradients-from-trace/run2}
mkdir -p "$out" /tmp/bin
for name in halcaps halcaps_cuda_tests; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 40 /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --repeats 30 \
    --implementations cuda_tensor --seed 2963 > "$out/bench_backward.txt" 2>&1
echo "rc $?" >> "$out/bench_backward.txt"; grep -E "^digitcaps|rc " "$out/bench_backward.txt" | cut -c1-150
timeout 60 ncu --kernel-name-base demangled --kernel-name "regex:backward_kernel|grad_u_hat" --launch-count 2 \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,launch__block_size,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active \
    --csv /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128 --repeats 1 \
    --implementations cuda_tensor > "$out/ncu.csv" 2>&1
echo "rc $?" >> "$out/ncu.csv"; grep -E '^"[0-9]' "$out/ncu.csv" | awk -F'","' '{print substr($5,1,50), $(NF-2), $NF}'
timeout 150 /tmp/bin/halcaps_cuda_tests "[hand_backward],cuda digitcaps: blog grid*,cuda digitcaps: odd sizes*,cuda digitcaps: cuda_tensor's MNIST variant*,cuda digitcaps: the hand-written fused layers*,cuda digitcaps: hard inputs*" \
    -d yes > "$out/tests.log" 2>&1
echo "rc $?" >> "$out/tests.log"; tail -4 "$out/tests.log"; grep -B3 -A14 FAILED "$out/tests.log" | head -40
SANITIZER_LOG_DIR=/tmp/sanitizer timeout 90 bash scripts/sanitize-gpu-tests.sh /tmp/bin/halcaps_cuda_tests \
    "cuda digitcaps: cuda_tensor's training pair*" > "$out/sanitizer.txt" 2>&1
echo "rc $?" >> "$out/sanitizer.txt"; tail -8 "$out/sanitizer.txt"

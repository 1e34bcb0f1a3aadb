#!/usr/bin/env bash
# Run 5: ncu's time and instructions per kernel of both backward ops'
# cuda_tensor at MNIST b128 (run 4's build; run 4's ncu stopped inside the
# plain op's calls), the routing kernels only.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-tensor-training-pair/run5}
mkdir -p "$out" /tmp/bin
xz -dc .gpu/halcaps.xz > /tmp/bin/halcaps; chmod +x /tmp/bin/halcaps
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 200 ncu --clock-control none --cache-control none --kernel-name-base demangled --launch-count 200 \
    --kernel-name "regex:pass_kernel|_rows|rows_of|grad_u_hat|first_coefficients|backward_kernel" \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread --csv \
    /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --implementations cuda_tensor --shapes mnist_b128 \
    --repeats 1 --warmup 0 --seed 2931 > "$out/ncu.csv" 2> "$out/ncu.err"
echo "ncu rc $?"; grep -c gpu__time "$out/ncu.csv"; xz -T4 -9 "$out/ncu.csv"

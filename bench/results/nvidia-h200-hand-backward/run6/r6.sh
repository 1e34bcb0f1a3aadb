#!/usr/bin/env bash
# Run 6: cuda_passes' grad_u_hat written by a kernel of its own (from the
# stored coefficients, no read of u_hat), the t = 0 backward pass only where
# grad_b0 is asked for, and the backward pass held to 3 blocks an SM. The
# new tests, the layer's backward against rows_vectors in one bench, and
# ncu's time per kernel of cuda_passes' own kernels at MNIST b128.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-hand-backward/run6}
mkdir -p "$out" /tmp/bin
for name in halcaps halcaps_cuda_tests; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 120 /tmp/bin/halcaps_cuda_tests "[hand_backward]" > "$out/hand_backward_tests.log" 2>&1; echo "rc $?" >> "$out/hand_backward_tests.log"
tail -3 "$out/hand_backward_tests.log"
timeout 150 /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --repeats 30 \
    --implementations cuda_passes,rows_vectors --seed 2818 > "$out/bench.txt" 2>&1; echo "rc $?" >> "$out/bench.txt"
cat "$out/bench.txt"
timeout 200 ncu --clock-control none --cache-control none \
    --kernel-name "regex:forward_pass|backward_pass|forward_rows|backward_rows|grad_u_hat_rows|sum_over_batch" --launch-count 14 \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,smsp__issue_active.avg.pct_of_peak_sustained_active \
    --csv /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --implementations cuda_passes --shapes mnist_b128 \
    --repeats 1 --warmup 0 --seed 2819 > "$out/ncu_passes.csv" 2> "$out/ncu_passes.err"
grep -E '^"[0-9]' "$out/ncu_passes.csv" | awk -F'","' '{split($5,k,"("); print $1, substr(k[1],1,50), $(NF-2), $NF}' | sed 's/"//g; s/void unnamed>:://' | grep -v "forward_rows\|backward_rows" | grep -E "time|inst_exec|warps_active|registers"

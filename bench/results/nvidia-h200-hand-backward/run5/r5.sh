#!/usr/bin/env bash
# Run 5: cuda_passes redesigned: a lane an output capsule of a row of u_hat,
# its out_dim values in registers (dots in the lane, only the softmax's sums
# over j across lanes), 16-byte loads where out_dim is a multiple of 4. The
# new tests, the layer's backward against rows_vectors in one bench, and
# ncu's time per kernel of cuda_passes' own kernels at MNIST b128.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-hand-backward/run5}
mkdir -p "$out" /tmp/bin
for name in halcaps halcaps_cuda_tests; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 120 /tmp/bin/halcaps_cuda_tests "[hand_backward]" > "$out/hand_backward_tests.log" 2>&1; echo "rc $?" >> "$out/hand_backward_tests.log"
tail -3 "$out/hand_backward_tests.log"
timeout 150 /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --repeats 30 \
    --implementations cuda_passes,rows_vectors --seed 2816 > "$out/bench.txt" 2>&1; echo "rc $?" >> "$out/bench.txt"
cat "$out/bench.txt"
timeout 200 ncu --clock-control none --cache-control none \
    --kernel-name "regex:forward_pass|backward_pass|forward_rows|backward_rows|sum_over_batch" --launch-count 13 \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,smsp__issue_active.avg.pct_of_peak_sustained_active \
    --csv /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --implementations cuda_passes --shapes mnist_b128 \
    --repeats 1 --warmup 0 --seed 2817 > "$out/ncu_passes.csv" 2> "$out/ncu_passes.err"
grep -E '^"[0-9]' "$out/ncu_passes.csv" | awk -F'","' '{split($5,k,"("); print $1, substr(k[1],1,50), $(NF-2), $NF}' | sed 's/"//g; s/void unnamed>:://' | grep -v "rows" | grep -E "time|inst_exec|warps_active|registers"

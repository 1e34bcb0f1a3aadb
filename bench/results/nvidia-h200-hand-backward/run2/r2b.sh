#!/usr/bin/env bash
# Run 2b: ncu's time per kernel of cuda_passes' own kernels (the first call,
# 13 launches) at MNIST b128, with the binaries of run 2.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-hand-backward/run2}
mkdir -p "$out" /tmp/bin
xz -dc .gpu/halcaps.xz > /tmp/bin/halcaps; chmod +x /tmp/bin/halcaps
timeout 200 ncu --clock-control none --cache-control none \
    --kernel-name "regex:forward_pass|backward_pass|forward_rows|backward_rows|sum_over_batch" --launch-count 13 \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio,smsp__average_warp_latency_issue_stalled_short_scoreboard.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active \
    --csv /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --implementations cuda_passes --shapes mnist_b128 \
    --repeats 1 --warmup 0 --seed 2813 > "$out/ncu_passes.csv" 2> "$out/ncu_passes.err"
grep -E '^"[0-9]' "$out/ncu_passes.csv" | awk -F'","' '{split($5,k,"("); print $1, substr(k[1],1,50), $(NF-2), $NF}' | sed 's/"//g; s/void unnamed>:://'

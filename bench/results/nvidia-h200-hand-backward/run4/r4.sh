#!/usr/bin/env bash
# Run 4: cuda_passes with no shuffle in a branch (every level shuffles and
# selects; rows past the chunk computed as zeros), two builds: rows in
# flight a warp for about 20 floats a lane (halcaps_r4: 4 rows at MNIST) and
# for about 10 (halcaps_r2: 2 rows). The tests (the r2 build), the two
# alternating in bench with rows_vectors, ncu's time per kernel of each.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-hand-backward/run4}
mkdir -p "$out" /tmp/bin
for name in halcaps_r4 halcaps_r2 halcaps_cuda_tests; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 120 /tmp/bin/halcaps_cuda_tests "[hand_backward]" > "$out/hand_backward_tests.log" 2>&1; echo "rc $?" >> "$out/hand_backward_tests.log"
tail -3 "$out/hand_backward_tests.log"
for round in 1 2; do
    for name in halcaps_r4 halcaps_r2; do
        timeout 100 /tmp/bin/$name bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --repeats 30 \
            --implementations cuda_passes,rows_vectors --seed 281$round > "$out/bench_${name}_$round.txt" 2>&1
        echo "== $name round $round"; grep -E "^digitcaps_backward " "$out/bench_${name}_$round.txt" | awk '{print $2, $3, $5, $6}'
    done
done
for name in halcaps_r4 halcaps_r2; do
    timeout 100 ncu --clock-control none --cache-control none \
        --kernel-name "regex:forward_pass|backward_pass|forward_rows|backward_rows|sum_over_batch" --launch-count 13 \
        --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active \
        --csv /tmp/bin/$name bench --device cuda --op digitcaps_backward --implementations cuda_passes --shapes mnist_b128 \
        --repeats 1 --warmup 0 --seed 2815 > "$out/ncu_$name.csv" 2> "$out/ncu_$name.err"
    echo "== ncu $name"
    grep -E '^"[0-9]' "$out/ncu_$name.csv" | awk -F'","' '{split($5,k,"("); print $1, substr(k[1],1,50), $(NF-2), $NF}' | sed 's/"//g; s/void unnamed>:://' | grep -v "rows" | grep -E "time|inst_exec|warps_active|registers"
done

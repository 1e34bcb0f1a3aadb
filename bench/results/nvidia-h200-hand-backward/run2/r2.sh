#!/usr/bin/env bash
# Run 2: cuda_passes with c_t stored by the forward passes and read back by
# the backward ones, and rows of u_hat in flight together. The new tests,
# the layer's backward against rows_vectors in one bench, and ncu's time per
# kernel of one cuda_passes call at MNIST b128.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-hand-backward/run2}
mkdir -p "$out" /tmp/bin
for name in halcaps halcaps_cuda_tests; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 120 /tmp/bin/halcaps_cuda_tests "[hand_backward]" > "$out/hand_backward_tests.log" 2>&1; echo "rc $?" >> "$out/hand_backward_tests.log"
tail -3 "$out/hand_backward_tests.log"
timeout 150 /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --repeats 30 \
    --implementations cuda_passes,rows_vectors --seed 2812 > "$out/bench.txt" 2>&1; echo "rc $?" >> "$out/bench.txt"
cat "$out/bench.txt"
timeout 150 ncu --clock-control none --cache-control none \
    --kernel-name "regex:passes|forward_staged|backward_kernel|sum_over_batch" --launch-count 16 \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    --csv /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --implementations cuda_passes --shapes mnist_b128 \
    --repeats 1 --warmup 0 --seed 2813 > "$out/ncu.csv" 2> "$out/ncu.err"
grep -E '"(gpu__time|dram__|sm__warps)' "$out/ncu.csv" | awk -F'","' '{split($5,k,"("); print $1, substr(k[1],1,60), $(NF-2), $NF}' | sed 's/"//g'

#!/usr/bin/env bash
# Run 1: does the order in which grad_u_hat is written and read back matter?
# One experiment binary (branch exp-l2-order: environment switches, not
# shipped), four settings of HALCAPS_EXP_B_MAJOR (grad_u_hat_columns' grid:
# batch rows the slow axis) and HALCAPS_EXP_DESCENDING (the tensor-core
# gradients walk the batch tiles from the last), 2 rounds each, then ncu's
# time and L2 hit rate of the two kernels at 00 and 11.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-l2-order/run1}
mkdir -p "$out" /tmp/bin
xz -dc .gpu/halcaps_exp.xz > /tmp/bin/halcaps; chmod +x /tmp/bin/halcaps
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
for round in 1 2; do
    for setting in 00 10 01 11; do
        HALCAPS_EXP_B_MAJOR=${setting:0:1} HALCAPS_EXP_DESCENDING=${setting:1:1} timeout 40 /tmp/bin/halcaps bench \
            --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --repeats 30 \
            --implementations cuda_tensor --seed $((9100 + round)) > "$out/bench_${setting}_r$round.txt" 2>&1
        echo "rc $?" >> "$out/bench_${setting}_r$round.txt"
        grep -E "^digitcaps" "$out/bench_${setting}_r$round.txt" | awk -v s=$setting -v r=$round '{print s, r, $1, $2, $6}'
    done
done
for setting in 00 11; do
    HALCAPS_EXP_B_MAJOR=${setting:0:1} HALCAPS_EXP_DESCENDING=${setting:1:1} timeout 100 ncu --kernel-name-base demangled \
        --kernel-name "regex:grad_u_hat_columns|backward_kernel" --launch-count 4 \
        --metrics gpu__time_duration.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum \
        --csv /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128 --repeats 1 \
        --implementations cuda_tensor > "$out/ncu_$setting.csv" 2>&1
    echo "rc $?" >> "$out/ncu_$setting.csv"
    grep -E '^"[0-9]' "$out/ncu_$setting.csv" | awk -F'","' -v s=$setting '{print s, substr($5,1,40), $(NF-2), $NF}'
done

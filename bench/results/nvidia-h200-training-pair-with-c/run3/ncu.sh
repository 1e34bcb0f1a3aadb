#!/usr/bin/env bash
# Run 3: ncu on run 1's binary (aed740f, main's stores): the forward's
# kernels at MNIST b128 for digitcaps_with_s and digitcaps_with_c
# (cuda_tensor), with time, instructions, registers, local-memory spills and
# L2 write sectors, to see where keeping c costs 17 us. Called twice: plainly
# (the first 40 launches: digitcaps, digitcaps_with_s; ncu_plain.csv) and with
# KERNELS="true|first_coefficients" LAUNCHES=6 CSV=ncu_with_c.csv (the storing
# passes and the c_0 kernel).
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-training-pair-with-c/run3}
mkdir -p "$out" /tmp/bin
xz -dc .gpu/halcaps.xz > /tmp/bin/halcaps; chmod +x /tmp/bin/halcaps
timeout 150 ncu --kernel-name-base demangled --kernel-name "regex:${KERNELS:-pass_kernel|first_coefficients|squash}" \
    --launch-count ${LAUNCHES:-40} \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,lts__t_sectors_op_write.sum,dram__bytes_write.sum,launch__occupancy_limit_shared_mem,launch__occupancy_limit_registers,sm__warps_active.avg.pct_of_peak_sustained_active \
    --csv /tmp/bin/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 --repeats 1 \
    --implementations cuda_tensor > "$out/${CSV:-ncu.csv}" 2>&1
echo "rc $?" >> "$out/${CSV:-ncu.csv}"
grep -E '^"[0-9]' "$out/${CSV:-ncu.csv}" | awk -F'","' '{split($5,k,"<"); printf "%s %s %s %s\n", $1, substr(k[1],1,40), $(NF-2), $NF}' | sed 's/"//g' | head -60

#!/usr/bin/env bash
# Run 3, ncu's full section set on the grad_u_hat kernels at MNIST b128:
# run 3's grad_u_hat_columns (.gpu/halcaps.xz, cuda_tensor) and the kernel it
# replaced, grad_u_hat_rows a thread per 8 floats (.gpu/halcaps_prev.xz,
# cuda_passes); also the row kernels (forward_rows, backward_rows) of both.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-tensor-backward/run3}
mkdir -p "$out" /tmp/bin
for name in halcaps halcaps_prev; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
for run in halcaps:cuda_tensor halcaps_prev:cuda_passes; do
    name=${run%%:*}; impl=${run##*:}
    rep="$out/ncu_full_${name}_grad_u_hat"
    timeout 200 ncu --set full --kernel-name-base demangled --kernel-name "regex:grad_u_hat|forward_rows" \
        --launch-count 2 -o "$rep" /tmp/bin/$name bench --device cuda --op digitcaps_backward \
        --implementations $impl --shapes mnist_b128 --repeats 1 --warmup 0 --seed 9003 > "$rep.log" 2>&1
    ncu --import "$rep.ncu-rep" --page details --print-units base > "$rep.txt" 2>&1
    xz -T4 "$rep.ncu-rep"
    grep -E "^  [a-z_]|Duration|DRAM Throughput|Memory Throughput|L2 Hit|L1/TEX Hit|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Issued Ipc|Mem Busy|Max Bandwidth|Stall|Theoretical Occ" "$rep.txt" | head -60
done

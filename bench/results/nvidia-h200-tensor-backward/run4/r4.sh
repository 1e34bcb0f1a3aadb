#!/usr/bin/env bash
# Run 4: the row kernels with lanes e and e + 16 each half of the chunks and
# 8 sums in flight a lane (.gpu/halcaps.xz), bench of both hand-written
# backward versions; ncu's full set on the grad_u_hat kernels: run 3's
# grad_u_hat_columns (.gpu/halcaps.xz) and the kernel before it,
# grad_u_hat_rows a thread per 8 floats (.gpu/halcaps_prev.xz, cuda_passes),
# and on forward_rows.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-tensor-backward/run4}
mkdir -p "$out" /tmp/bin
for name in halcaps halcaps_prev; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 120 /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --repeats 30 \
    --implementations cuda_tensor,cuda_passes --seed 2833 > "$out/bench_backward.txt" 2>&1
echo "rc $?" >> "$out/bench_backward.txt"; cut -c1-200 "$out/bench_backward.txt"
for run in halcaps:cuda_tensor:grad_u_hat halcaps_prev:cuda_passes:grad_u_hat halcaps:cuda_tensor:forward_rows; do
    IFS=: read -r name impl kernel <<< "$run"
    rep="$out/ncu_full_${name}_$kernel"
    timeout 200 ncu --set full --kernel-name-base demangled --kernel-name "regex:$kernel" \
        --launch-count 1 -o "$rep" /tmp/bin/$name bench --device cuda --op digitcaps_backward \
        --implementations $impl --shapes mnist_b128 --repeats 1 --warmup 0 --seed 9003 > "$rep.log" 2>&1
    ncu --import "$rep.ncu-rep" --page details --print-units base > "$rep.txt" 2>&1
    xz -T4 "$rep.ncu-rep"
    echo "== $name $impl $kernel"
    grep -E "Duration|DRAM Throughput|L2 Hit|L1/TEX Hit|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Issued Ipc|Mem Busy|Max Bandwidth|Executed Instructions  " "$rep.txt" | head -14
done

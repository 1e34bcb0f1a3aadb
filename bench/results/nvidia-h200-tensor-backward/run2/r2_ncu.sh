#!/usr/bin/env bash
# Run 2, ncu: per kernel at MNIST b128 for the layer backward's cuda_tensor
# and cuda_passes at run 2's build (.gpu/halcaps.xz) and cuda_passes at the
# head of main before this work (.gpu/halcaps_prev.xz: grad_u_hat_rows a
# thread per 8 floats).
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-tensor-backward/run2}
mkdir -p "$out" /tmp/bin
for name in halcaps halcaps_prev; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
for run in halcaps:cuda_tensor halcaps:cuda_passes halcaps_prev:cuda_passes; do
    name=${run%%:*}; impl=${run##*:}
    csv="$out/ncu_${name}_${impl}_b128.csv"
    timeout 120 ncu --clock-control none --cache-control none --kernel-name-base demangled \
        --kernel-name regex:cuda_reference --launch-count 18 \
        --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,dram__bytes.sum --csv \
        /tmp/bin/$name bench --device cuda --op digitcaps_backward --implementations $impl --shapes mnist_b128 \
        --repeats 1 --warmup 0 --seed 9003 > "$csv" 2> "${csv%.csv}.err"
    echo "== ncu $name $impl b128 (ns)"
    grep -E '"gpu__time' "$csv" | awk -F'","' '{n=$5; sub(/\(.*/, "", n); sub(/.*::/, "", n); print $1, n, $NF}' | sed 's/"//g'
done

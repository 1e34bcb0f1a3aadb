#!/usr/bin/env bash
# Run 5: grad_u_hat_columns on a 2D grid (a thread's place from its block
# and thread indices, no divisions), the row kernels as in run 4 (lanes e and
# e + 16 each half of the chunks, 8 sums in flight a lane). The hand_backward tests; the layer backward's hand-written
# versions and the Halide default at MNIST b128 and b512; ncu per kernel of
# both hand-written versions at b128 (the hand-written kernels only).
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-tensor-backward/run5}
mkdir -p "$out" /tmp/bin
for name in halcaps halcaps_cuda_tests; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 170 /tmp/bin/halcaps_cuda_tests "[hand_backward]" > "$out/hand_backward_tests.log" 2>&1
echo "rc $?" >> "$out/hand_backward_tests.log"
tail -3 "$out/hand_backward_tests.log"; grep -B5 -A25 FAILED "$out/hand_backward_tests.log" | head -60
timeout 120 /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --repeats 30 \
    --implementations cuda_tensor,cuda_passes,rows_vectors --seed 2834 > "$out/bench_backward.txt" 2>&1
echo "rc $?" >> "$out/bench_backward.txt"; cut -c1-200 "$out/bench_backward.txt"
for impl in cuda_tensor cuda_passes; do
    timeout 120 ncu --clock-control none --cache-control none --kernel-name-base demangled --kernel-name regex:cuda_reference --launch-count 18 \
        --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread --csv \
        /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --implementations $impl --shapes mnist_b128 \
        --repeats 1 --warmup 0 --seed 9003 > "$out/ncu_${impl}_b128.csv" 2> "$out/ncu_${impl}_b128.err"
    echo "== ncu $impl b128 (ns)"
    grep -E '"gpu__time' "$out/ncu_${impl}_b128.csv" | awk -F'","' '{n=$5; sub(/\(.*/, "", n); sub(/.*::/, "", n); print $1, n, $NF}' | sed 's/"//g'
done

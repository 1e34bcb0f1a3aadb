#!/usr/bin/env bash
# Run 1, the first build of the layer backward's cuda_tensor (.gpu/halcaps.xz,
# .gpu/halcaps_cuda_tests.xz) against the head of main before it
# (.gpu/halcaps_prev.xz, 60df4b8's kernels): the hand_backward tests (the new
# implementation at odd sizes and its limits, and every CUDA backward on hard
# inputs); the forward cuda_tensor, whose pass kernel gained the backward's
# mode, A/B against the previous binary; the layer backward's hand-written
# versions and the Halide default at MNIST b128 and b512; ncu per kernel of
# cuda_tensor's backward at b128.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-tensor-backward/run1}
mkdir -p "$out" /tmp/bin
for name in halcaps halcaps_prev halcaps_cuda_tests; do
    [ -f ".gpu/$name.xz" ] && { xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; }
done
# In two calls (64 MB a call carried): PART=tests (the tests and the backward bench), PART=ab (the rest).
part=${PART:-tests}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
if [ "$part" = tests ]; then
timeout 170 /tmp/bin/halcaps_cuda_tests "[hand_backward]" > "$out/hand_backward_tests.log" 2>&1
echo "rc $?" >> "$out/hand_backward_tests.log"
tail -3 "$out/hand_backward_tests.log"; grep -B5 -A25 FAILED "$out/hand_backward_tests.log" | head -80
timeout 120 /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --repeats 30 \
    --implementations cuda_tensor,cuda_passes,rows_vectors --seed 2830 > "$out/bench_backward.txt" 2>&1
echo "rc $?" >> "$out/bench_backward.txt"; cat "$out/bench_backward.txt" | cut -c1-220
exit 0
fi
for round in 1 2; do
    for name in halcaps_prev halcaps; do
        timeout 60 /tmp/bin/$name bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --repeats 30 \
            --implementations cuda_tensor --seed 900$round > "$out/forward_${name}_$round.txt" 2>&1
        echo "== forward $name round $round"; grep -E "^digitcaps |wrong|rror" "$out/forward_${name}_$round.txt" | cut -c1-150
    done
done
timeout 120 ncu --clock-control none --cache-control none --launch-skip 0 --launch-count 40 \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread --csv \
    /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --implementations cuda_tensor --shapes mnist_b128 \
    --repeats 1 --warmup 0 --seed 9003 > "$out/ncu_b128.csv" 2> "$out/ncu_b128.err"
grep -E '"gpu__time' "$out/ncu_b128.csv" | awk -F'","' '{split($5,k,"("); print $1, substr(k[1],1,60), $NF}' | sed 's/"//g' | head -40

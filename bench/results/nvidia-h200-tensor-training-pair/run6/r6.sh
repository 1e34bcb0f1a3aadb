#!/usr/bin/env bash
# Run 6: A/B of both backward ops' cuda_tensor, run 4's build (halcaps_run4)
# against the candidate (halcaps): the with-logits passes at the deeper
# staging (no spill), the row kernels' chunk sums four at a time, and
# rows_of_given_s issuing its loads first. 3 rounds alternating, MNIST b128
# and b512; then ncu's time per kernel of the candidate at b128.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-tensor-training-pair/run6}
OP=digitcaps_backward IMPLEMENTATIONS=cuda_tensor BINARIES="halcaps_run4 halcaps" ROUNDS=3 TESTS="" \
    bash bench/gpu_ab.sh "$out" > /dev/null 2>&1
echo "gpu_ab rc $?"
mkdir -p /tmp/rounds && tar xf "$out/bench_rounds.tar" -C /tmp/rounds
for f in /tmp/rounds/bench_*.txt; do
    grep -E "^digitcaps_backward" "$f" | awk -v n="$(basename "$f" .txt)" '{print n, $1, $2, $6}'
done | sort -k2,3 | tee "$out/rounds_summary.txt"
xz -dc .gpu/halcaps.xz > /tmp/halcaps_candidate; chmod +x /tmp/halcaps_candidate
timeout 200 ncu --clock-control none --cache-control none --kernel-name-base demangled --launch-count 200 \
    --kernel-name "regex:pass_kernel|_rows|rows_of|grad_u_hat|first_coefficients|backward_kernel" \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread --csv \
    /tmp/halcaps_candidate bench --device cuda --op digitcaps_backward --implementations cuda_tensor \
    --shapes mnist_b128 --repeats 1 --warmup 0 --seed 2941 > "$out/ncu.csv" 2> "$out/ncu.err"
echo "ncu rc $?"; grep -c gpu__time "$out/ncu.csv"; xz -T4 -9 "$out/ncu.csv"

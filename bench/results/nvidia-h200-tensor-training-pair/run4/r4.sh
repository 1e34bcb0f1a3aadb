#!/usr/bin/env bash
# Run 4: with c_0 written once as an [I, J] table where grad_b0 is not asked
# for (both version-3 backward paths). Binaries in .gpu/ (halcaps.xz,
# halcaps_cuda_tests.xz, built on the build machine): the hand-written
# backward tests, the grid and odd-size tests; the training-pair test under
# compute-sanitizer's four tools; both backward ops' cuda_tensor at MNIST
# b128 and b512; ncu's time per kernel of one bench call at b128 (every
# kernel: the default forward's for s, then each op's checked call and its
# timed call).
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-tensor-training-pair/run4}
mkdir -p "$out" /tmp/bin
for name in halcaps halcaps_cuda_tests; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 120 /tmp/bin/halcaps_cuda_tests "[hand_backward],cuda digitcaps: blog grid*,cuda digitcaps: odd sizes*" -d yes \
    > "$out/tests.log" 2>&1
echo "rc $?" >> "$out/tests.log"; tail -8 "$out/tests.log"
SANITIZER_LOG_DIR=/tmp/sanitizer timeout 200 bash scripts/sanitize-gpu-tests.sh /tmp/bin/halcaps_cuda_tests \
    "cuda digitcaps: cuda_tensor's training pair*" > "$out/sanitizer.txt" 2>&1
echo "rc $?" >> "$out/sanitizer.txt"; tail -8 "$out/sanitizer.txt"
timeout 90 /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --repeats 30 \
    --implementations cuda_tensor --seed 2921 > "$out/bench_backward.txt" 2>&1
echo "rc $?" >> "$out/bench_backward.txt"; grep -E "^digitcaps|rc " "$out/bench_backward.txt" | cut -c1-150
timeout 150 ncu --clock-control none --cache-control none --kernel-name-base demangled --launch-count 120 \
    --metrics gpu__time_duration.sum,launch__registers_per_thread --csv \
    /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --implementations cuda_tensor --shapes mnist_b128 \
    --repeats 1 --warmup 0 --seed 2922 > "$out/ncu.csv" 2> "$out/ncu.err"
echo "ncu rc $?"; grep -c gpu__time "$out/ncu.csv"

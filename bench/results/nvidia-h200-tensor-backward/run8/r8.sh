#!/usr/bin/env bash
# Run 8, the closing run at this commit's build (.gpu/halcaps.xz,
# .gpu/halcaps_cuda_tests.xz), in two calls (each call's time limit):
#   PART=tests  every DigitCaps CUDA test; the hand_backward tests under
#               compute-sanitizer's four tools;
#   PART=bench  every implementation of the layer's backward, and the
#               forward's fastest, at MNIST b128 and b512 in one bench each;
#               the PyTorch peers (eager, torch.compile) of both.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-tensor-backward/run8}
part=${PART:-tests}
mkdir -p "$out" /tmp/bin
for name in halcaps halcaps_cuda_tests; do
    [ -f ".gpu/$name.xz" ] && { xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; }
done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
if [ "$part" = tests ]; then
    timeout 300 /tmp/bin/halcaps_cuda_tests "[digitcaps]" > "$out/digitcaps_tests.log" 2>&1
    echo "rc $?" >> "$out/digitcaps_tests.log"
    tail -3 "$out/digitcaps_tests.log"; grep -B5 -A25 FAILED "$out/digitcaps_tests.log" | head -60
    SANITIZER_LOG_DIR=/tmp/sanitizer timeout 240 bash scripts/sanitize-gpu-tests.sh /tmp/bin/halcaps_cuda_tests \
        "[hand_backward]" > "$out/sanitizer.txt" 2>&1
    echo "rc $?" >> "$out/sanitizer.txt"; cat "$out/sanitizer.txt"
    exit 0
fi
timeout 150 /tmp/bin/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --repeats 30 \
    --seed 2840 --json "$out/bench_backward.json" --markdown "$out/bench_backward.md" > "$out/bench_backward.txt" 2>&1
echo "rc $?" >> "$out/bench_backward.txt"; cut -c1-200 "$out/bench_backward.txt"
timeout 60 /tmp/bin/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --repeats 30 \
    --implementations cuda_tensor,fused_split_all_vectors,cuda_naive --seed 2841 > "$out/bench_forward.txt" 2>&1
echo "rc $?" >> "$out/bench_forward.txt"; cut -c1-200 "$out/bench_forward.txt"
timeout 150 python3 bench/pytorch_digitcaps.py --shapes 128 512 --repeats 30 --backward > "$out/pytorch.txt" 2>&1
echo "rc $?" >> "$out/pytorch.txt"; grep -v Warn "$out/pytorch.txt" | grep -v warnings.warn | cut -c1-200

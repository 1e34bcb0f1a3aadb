#!/usr/bin/env bash
# Run 2: where run 1's tests stopped (both the odd-sizes test and the new
# training-pair test ran past their time limits): each test alone with every
# assertion printed (-s) and its duration, the tail of each kept.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-tensor-training-pair/run2}
mkdir -p "$out" /tmp/bin
for name in halcaps halcaps_cuda_tests; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
n=0
for test in "cuda digitcaps: cuda_tensor's training pair*" "cuda digitcaps: odd sizes*"; do
    n=$((n + 1))
    timeout -s INT 60 /tmp/bin/halcaps_cuda_tests "$test" -s -d yes > /tmp/t$n.log 2>&1
    echo "rc $?" >> /tmp/t$n.log
    grep -E "with expansion|seed|digitcaps|PASSED|FAILED|rc |seconds|^  [a-z_]+ " /tmp/t$n.log | tail -40 > "$out/test$n.tail"
    wc -l /tmp/t$n.log >> "$out/test$n.tail"; tail -45 /tmp/t$n.log >> "$out/test$n.tail"
    tail -60 "$out/test$n.tail" | cut -c1-160
done

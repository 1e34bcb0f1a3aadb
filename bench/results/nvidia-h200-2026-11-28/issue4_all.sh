#!/usr/bin/env bash
# Issue 4's operators (the DigitCaps layer, routing alone, the layer's
# backward and the training pairs), every implementation at the standard
# shapes, in one call with the PyTorch peers (forward, and forward + backward),
# on the binaries of the commit that adds this script (.gpu/halcaps.xz).
# Every halcaps row is checked against the float64 reference before it is
# timed. Outputs: bench_<op>.{txt,json,md}, pytorch.txt.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-2026-11-28}
mkdir -p "$out" /tmp/bin
xz -dc .gpu/halcaps.xz > /tmp/bin/halcaps && chmod +x /tmp/bin/halcaps
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
limits=(digitcaps:130 route:70 digitcaps_backward:190)
for entry in "${limits[@]}"; do
    op=${entry%%:*}; limit=${entry##*:}
    timeout "$limit" /tmp/bin/halcaps bench --device cuda --op "$op" --repeats 30 --seed 2811 \
        --json "$out/bench_$op.json" --markdown "$out/bench_$op.md" > "$out/bench_$op.txt" 2>&1
    echo "rc $?" >> "$out/bench_$op.txt"
    grep -E "^(digitcaps|route)[a-z_]* +mnist_b128|rc " "$out/bench_$op.txt" | cut -c1-120
done
timeout 180 python3 bench/pytorch_digitcaps.py --shapes 128 512 --repeats 30 --backward > "$out/pytorch.txt" 2>&1
echo "rc $?" >> "$out/pytorch.txt"; tail -6 "$out/pytorch.txt"

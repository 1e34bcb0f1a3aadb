#!/usr/bin/env bash
# Run 7: the row kernels of run 6 (.gpu/halcaps.xz: chunks summed 8 at a time
# over both half-warps, launched overlapping the pass ahead) against the
# same build with run 2's row kernels (.gpu/halcaps_rows_old.xz: one sum a
# lane, plain launches), alternating, two rounds, both hand-written backward
# versions at MNIST b128 and b512.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-tensor-backward/run7}
mkdir -p "$out" /tmp/bin
for name in halcaps halcaps_rows_old; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
for round in 1 2; do
    for name in halcaps_rows_old halcaps; do
        timeout 100 /tmp/bin/$name bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 \
            --repeats 30 --implementations cuda_tensor,cuda_passes --seed 900$round > "$out/bench_${name}_$round.txt" 2>&1
        echo "== $name round $round"; grep -E "^digitcaps_backward |wrong|rror" "$out/bench_${name}_$round.txt" | cut -c1-110
    done
done

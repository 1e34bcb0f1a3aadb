#!/usr/bin/env bash
# Run 6 of the tile-dataflow probe (run 6's build of the probe, built on the CPU
# build machine and carried as .gpu/dataflow_probe), from the repository
# root: the library's structure (layered) and two floors under it, at MNIST
# b128 with the steps at their timeline lengths, 3/4, 1/2 and none of them,
# and at MNIST b512.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-tile-dataflow/run6}
probe=./.gpu/dataflow_probe
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
for f in 1.00 0.75 0.50 0.00; do
    first=$(awk -v f=$f 'BEGIN { printf "%.0f", 1360 * f }')
    later=$(awk -v f=$f 'BEGIN { printf "%.0f", 1490 * f }')
    timeout 60 $probe --dataflow 0 --step-ns-first $first --step-ns $later | tee "$out/probe_b128_steps_x$f.txt"
done
timeout 60 $probe --dataflow 0 --tiles 16 --chunks 16 --steps-first 18 --steps 36 --step-ns-first 1240 \
    --step-ns 1520 | tee "$out/probe_b512.txt"

#!/usr/bin/env bash
# Runs the tile-dataflow probe (run 5's build of the probe, built on the CPU build
# machine and carried as .gpu/dataflow_probe) from the repository root:
# MNIST b128's plan with the steps' times of the timeline study, the same
# with no steps (the structure's own cost), and MNIST b512's plan.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-tile-dataflow/run5}
probe=./.gpu/dataflow_probe
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 60 $probe | tee "$out/probe_b128.txt"
timeout 60 $probe --step-ns-first 0 --step-ns 0 | tee "$out/probe_b128_no_steps.txt"
timeout 60 $probe --tiles 16 --chunks 16 --steps-first 18 --steps 36 --step-ns-first 1240 --step-ns 1520 \
    | tee "$out/probe_b512.txt"

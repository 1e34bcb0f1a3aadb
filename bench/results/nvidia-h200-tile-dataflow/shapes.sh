#!/usr/bin/env bash
# Runs 1-5 of the tile-dataflow probe, from the repository root, with that
# run's build of the probe carried as .gpu/dataflow_probe (README: how to
# rebuild it). Usage: bash shapes.sh RUN (1-5). Shapes: MNIST b128's plan
# with the steps' times of the timeline study, the same with no steps (the
# structure's own cost), and MNIST b512's plan.
set -uo pipefail
run=${1:?usage: shapes.sh RUN}
out=${OUT:-bench/results/nvidia-h200-tile-dataflow/run$run}
probe=./.gpu/dataflow_probe
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 60 $probe | tee "$out/probe_b128.txt"
timeout 60 $probe --step-ns-first 0 --step-ns 0 | tee "$out/probe_b128_no_steps.txt"
timeout 60 $probe --tiles 16 --chunks 16 --steps-first 18 --steps 36 --step-ns-first 1240 --step-ns 1520 \
    | tee "$out/probe_b512.txt"

#!/usr/bin/env bash
# Runs the cluster residency probe (cluster_probe.cu, built on the CPU build
# machine and carried as .gpu/cluster_probe) from the repository root.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-cluster-residency/run1}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
./.gpu/cluster_probe | tee "$out/cluster_probe.txt"

#!/usr/bin/env bash
# The PyTorch peers again, the call after issue4_all.sh on the same machine:
# that call's pytorch.txt, gpu.txt and bench_route.txt did not come back (the
# device tool returns at most 8 files). Outputs: gpu.txt, pytorch.txt.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-2026-11-28}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
timeout 180 python3 bench/pytorch_digitcaps.py --shapes 128 512 --repeats 30 --backward > "$out/pytorch.txt" 2>&1
echo "rc $?" >> "$out/pytorch.txt"; grep -c '"us"' "$out/pytorch.txt"

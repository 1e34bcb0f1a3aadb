#!/bin/bash
# Session 2026-11-22c, run 4: the JIT's register cap (Halide's CUDA runtime passes 64 unless
# HL_CUDA_JIT_MAX_REGISTERS says otherwise), for the layer forward and backward defaults and the
# prediction's gradients. Same binaries as run 2.
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
for regs in 64 96 128 255; do
  echo "== HL_CUDA_JIT_MAX_REGISTERS=$regs"
  HL_CUDA_JIT_MAX_REGISTERS=$regs $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 \
    --implementations fused_split_all_vectors --repeats 30 --seed 431 2>&1 | grep -E "digitcaps  "
  HL_CUDA_JIT_MAX_REGISTERS=$regs $G/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128 \
    --implementations rows_predict --repeats 30 --seed 432 2>&1 | grep -E "digitcaps_backward "
  HL_CUDA_JIT_MAX_REGISTERS=$regs $G/halcaps bench --device cuda --op predict_backward --shapes mnist_b128 \
    --implementations tuned --repeats 30 --seed 433 2>&1 | grep -E "predict_backward "
done > $OUT/register_cap.txt 2>&1
cat $OUT/register_cap.txt

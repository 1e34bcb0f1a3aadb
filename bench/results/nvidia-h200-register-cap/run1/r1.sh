#!/bin/bash
# Session 2026-11-22h, run 1: the same binary (HEAD 204e27b) under the CUDA driver's register cap for
# Halide's kernels (HL_CUDA_JIT_MAX_REGISTERS, read by Halide's CUDA runtime when it loads a pipeline's
# PTX; 64 when unset) at 64, 96, 128 and 255. Every row is checked before it is timed.
G=/tmp/bin; mkdir -p $G; xz -dc .gpu/halcaps.xz > $G/halcaps && chmod +x $G/halcaps
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
for cap in 64 96 128 255; do
  export HL_CUDA_JIT_MAX_REGISTERS=$cap
  echo "== cap $cap" >> $OUT/bench.txt
  $G/halcaps bench --device cuda --op predict --shapes mnist_b128,mnist_b512 \
    --implementations batch_walk,batch_vectors,tuned --repeats 30 --seed 801 >> $OUT/bench.txt 2>&1
  $G/halcaps bench --device cuda --op predict_backward --shapes mnist_b128,mnist_b512 \
    --implementations vectors,tuned,cuda_fused --repeats 30 --seed 802 >> $OUT/bench.txt 2>&1
  $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 \
    --implementations fused_split_all_vectors,fused_split,fused --repeats 30 --seed 803 >> $OUT/bench.txt 2>&1
  $G/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 \
    --implementations rows_vectors --repeats 30 --seed 804 >> $OUT/bench.txt 2>&1
done
grep -E "^== |^predict|^digitcaps|copy" $OUT/bench.txt

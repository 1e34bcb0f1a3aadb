#!/bin/bash
# Session 2026-11-22h, run 4: the forward's partial-sum kernel with 2 out_dim values a thread (temporary variants
# try_ep2_b32 and try_ep2_b16: 32 or 16 batch accumulators for each of the 2 e; ptxas needs 128 / 108 registers
# and spills at Halide's default JIT cap of 64), against the default, with the driver's register cap for the
# whole process (HL_CUDA_JIT_MAX_REGISTERS) at 64, 128 and 255; then ncu per kernel at 128.
G=/tmp/bin; mkdir -p $G; for b in halcaps; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
for round in 1 2; do
  for cap in 64 128 255; do
    echo "== round $round cap $cap" >> $OUT/bench.txt
    HL_CUDA_JIT_MAX_REGISTERS=$cap $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 \
      --implementations fused_split_all_vectors,try_ep2_b32,try_ep2_b16 --repeats 30 --seed 79$round >> $OUT/bench.txt 2>&1
  done
done
grep -E "^== |^digitcaps |copy" $OUT/bench.txt
for impl in try_ep2_b32 try_ep2_b16 fused_split_all_vectors; do
  HL_CUDA_JIT_MAX_REGISTERS=128 ncu --cache-control none --clock-control none --metrics gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
    $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 --implementations $impl --repeats 1 --warmup 0 --seed 795 > /tmp/ncu_$impl.txt 2>&1
  python3 bench/results/nvidia-h200-forward-sums/run1/kernels.py /tmp/ncu_$impl.txt '_kernel_v_s0' > $OUT/ncu128_$impl.txt
  grep -E "launch__registers_per_thread|warps_active" /tmp/ncu_$impl.txt | sort | uniq -c | sort -rn | head -8 > $OUT/ncu128_regs_$impl.txt
done
head -8 $OUT/ncu128_*.txt

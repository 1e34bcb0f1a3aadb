#!/bin/bash
# Session 2026-11-21b, run 4: ncu detail of fused_split_vectors' pass-1 logits and partial-sum kernels.
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
ncu -k regex:"pass1_(logits|s_intm_global)" -c 2 --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis \
  --metrics smsp__inst_executed.sum,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_op_shared_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,smsp__inst_executed_op_global_ld.sum \
  $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 --implementations fused_split_vectors --repeats 1 --warmup 0 --seed 231 > $OUT/ncu_detail.txt 2>&1
grep -vE "^==PROF== Profiling|^    ---" $OUT/ncu_detail.txt | grep -E "_kernel|Duration|Throughput|Registers|Occupancy|Warp Cycles|Issued|Eligible|inst_executed|wavefronts|bank_conflicts|Block Limit|Stall|stall|One or More|No Eligible|Active Warps" | head -120

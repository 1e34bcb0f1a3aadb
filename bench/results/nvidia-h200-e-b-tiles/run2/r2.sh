#!/bin/bash
# Session 2026-11-22g, run 2: the e x b tile partial-sum kernel with W staged in shared memory per chunk
# (fused_split_tiles: 6 capsules x 16 batch elements a block; _b32: 5 x 32; _c4: 4 x 16), against
# fused_split_all_vectors. CUDA tests of the layer and routing, two timing rounds, ncu, memcheck and racecheck.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[digitcaps],[routing]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
I=fused_split_all_vectors,fused_split_tiles,fused_split_tiles_b32,fused_split_tiles_c4
for round in 1 2; do
  $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations $I \
    --repeats 30 --seed 71$round >> $OUT/bench.txt 2>&1
done
grep -E "^digitcaps |copy" $OUT/bench.txt
M=gpu__time_duration.sum
ncu --cache-control none --clock-control none --metrics $M $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 \
  --implementations fused_split_tiles --repeats 1 --warmup 0 --seed 713 > $OUT/ncu_tiles.txt 2>&1
python3 bench/results/nvidia-h200-forward-sums/run1/kernels.py $OUT/ncu_tiles.txt '_kernel_v_s0' > $OUT/ncu_tiles_kernels.txt; cat $OUT/ncu_tiles_kernels.txt
M=gpu__time_duration.sum,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed_op_shared_ld.sum,launch__registers_per_thread,sm__throughput.avg.pct_of_peak_sustained_active,smsp__average_warp_latency_issue_stalled_barrier.ratio,smsp__average_warp_latency_issue_stalled_short_scoreboard.ratio,smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio,smsp__average_warp_latency_issue_stalled_mio_throttle.ratio
ncu --cache-control none --clock-control none -k regex:s_intm_global_wrapper --metrics $M $G/halcaps digitcaps --device cuda \
  --schedule fused_split_tiles --repeats 1 --warmup 0 --seed 714 > $OUT/ncu_partials.txt 2>&1
grep -E "_kernel_|duration|pct|wavefronts|shared_ld|registers|ratio" $OUT/ncu_partials.txt | grep -v PROF | head -60
for shape in 1:1:8:1:16 17:33:8:10:16 130:37:8:11:16 3:37:8:5:16 9:13:8:12:16; do
  echo "== memcheck $shape" >> $OUT/sanitizer.log
  timeout 100 compute-sanitizer --tool memcheck $G/halcaps bench --device cuda --op digitcaps \
    --implementations fused_split_tiles,fused_split_tiles_b32 --shapes $shape --repeats 1 --warmup 0 --seed 715 >> $OUT/sanitizer.log 2>&1
  echo "rc $?" >> $OUT/sanitizer.log
done
echo "== racecheck 130:37:8:11:16" >> $OUT/sanitizer.log
timeout 200 compute-sanitizer --tool racecheck $G/halcaps bench --device cuda --op digitcaps --implementations fused_split_tiles \
  --shapes 130:37:8:11:16 --repeats 1 --warmup 0 --seed 716 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - -

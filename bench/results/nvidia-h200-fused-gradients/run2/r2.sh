#!/bin/bash
# Run 2: the fused gradients with g staged batch-innermost (row of chunk + 1 floats), W's slice staged, u
# read through L1, tiles padded to 8 floats, chunks of 64 (fused), 32 (fused_c32), 64 with 2 k a thread
# (fused_k4). predict_backward at MNIST b128, b512 and wide b32; memcheck and racecheck of the fused
# schedules at five shapes; ncu of fused at MNIST b128; every CUDA test.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps bench --device cuda --op predict_backward --shapes mnist_b128,mnist_b512,wide_b32 --repeats 30 --seed 6201 \
  --json $OUT/bench.json --markdown $OUT/bench.md > $OUT/bench.txt 2>&1; echo "rc $?" >> $OUT/bench.txt
grep -E "^predict_backward|rc " $OUT/bench.txt | awk '{print $2, $3, $5, $6, $9}'
for shape in 1:1:1:1:1 33:5:2:3:65 130:37:8:11:16 3:7:5:11:13 128:64:8:10:16; do
  for impl in fused fused_c32 fused_k4; do
    for tool in memcheck racecheck; do
      timeout 30 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op predict_backward --implementations $impl \
        --shapes $shape --repeats 1 --warmup 0 --seed 6202 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|WRONG" | sed "s/^/$tool $impl $shape: /" >> $OUT/sanitizer.log
    done
  done
done
grep -c " 0 errors\| 0 hazards" $OUT/sanitizer.log; grep -v " 0 errors\| 0 hazards" $OUT/sanitizer.log
timeout 120 ncu --kernel-name regex:kernel --launch-count 2 --metrics gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,launch__shared_mem_per_block_dynamic,launch__occupancy_limit_shared_mem,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio \
  $G/halcaps bench --device cuda --op predict_backward --implementations fused --shapes mnist_b128 --repeats 1 --warmup 0 --seed 6203 > $OUT/ncu.txt 2>&1
grep -E "kernel|duration|registers|warps_active|dram__|l1tex__t|inst_executed|bank|shared_mem|occupancy|stalled" $OUT/ncu.txt | head -40
timeout 240 $G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40

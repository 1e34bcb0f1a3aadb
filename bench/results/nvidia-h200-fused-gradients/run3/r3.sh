#!/bin/bash
# Run 3: the committed `fused` gradients (chunks of 32). Every CUDA test; predict_backward at MNIST b128
# and b512 against vectors and the hand-written kernels; ncu of the fused kernels at MNIST b128.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 330 $G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
$G/halcaps bench --device cuda --op predict_backward --shapes mnist_b128,mnist_b512 --repeats 30 --seed 6301 \
  --implementations fused,vectors,cuda_fused,cuda_tensor,cublas > $OUT/bench.txt 2>&1; echo "rc $?" >> $OUT/bench.txt
grep -E "^predict_backward|rc " $OUT/bench.txt | awk '{print $2, $3, $5, $6, $9}'
timeout 100 ncu --kernel-name regex:grad_W --launch-count 2 --metrics gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,launch__occupancy_limit_shared_mem,launch__block_size,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio \
  $G/halcaps bench --device cuda --op predict_backward --implementations fused --shapes mnist_b128 --repeats 1 --warmup 0 --seed 6302 > $OUT/ncu.txt 2>&1
grep -E "_kernel|duration|registers|warps_active|dram__|l1tex__t|inst_executed|bank|occupancy|block_size|stalled" $OUT/ncu.txt | head -30

#!/bin/bash
# Run 2: cuda_tensor with grad_u's and grad_W's mma interleaved per 16 columns of je, grad_u in four chains of
# dependent mma (k-step parity x big/small products), and the copies of full rows without per-piece index checks;
# beside it an uncommitted try, cuda_try_4blocks (the same kernel at 4 blocks an SM: 230 registers, 8 warps).
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[grid],[odd],[device]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
$G/halcaps bench --device cuda --op predict_backward --shapes mnist_b128,mnist_b512,wide_b32 --repeats 30 --seed 1211 \
  --implementations vectors,cuda_fused,cuda_tensor,cuda_try_4blocks --json $OUT/predict_backward.json > $OUT/bench.txt 2>&1
grep -E "^predict_backward |copy" $OUT/bench.txt | cut -c1-160
for impl in cuda_tensor cuda_try_4blocks; do
ncu --kernel-name regex:backward_kernel --section WarpStateStats --section SpeedOfLight --section Occupancy --section LaunchStats \
  --metrics gpu__time_duration.sum,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.per_cycle_active \
  --page raw $G/halcaps bench --device cuda --op predict_backward --shapes mnist_b128 --implementations $impl --repeats 1 --warmup 0 --seed 1212 > $OUT/ncu_$impl.txt 2>&1
echo "== $impl"; grep -E "gpu__time_duration.sum|smsp__inst_executed.sum |hmma_cycles_active.avg|dram__throughput.avg.pct|bank_conflicts_pipe_lsu_mem_shared.sum|registers_per_thread |warps_active.avg.pct|issue_active.avg.per_cycle" $OUT/ncu_$impl.txt | awk '{print $1, $NF}'
grep -E "issue_stalled.*per_issue_active.ratio" $OUT/ncu_$impl.txt | sort -u | sort -k3 -g -r | head -5 | awk '{print $1, $NF}'
done

#!/bin/bash
# Run 3: three orders of cuda_tensor's work (uncommitted variants beside the candidate):
#   cuda_tensor          run 1's order (grad_u's 20 k-steps, then grad_W's 10 m-tiles) with run 2's copies of full rows;
#   cuda_try_interleaved run 2's kernel (grad_u and grad_W interleaved per 16 columns of je, four grad_u chains);
#   cuda_try_half_chunks run 1's order in chunks of 80 je (2 at MNIST): 128 registers, 8 blocks (16 warps) an SM.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[grid],[odd],[device]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
$G/halcaps bench --device cuda --op predict_backward --shapes mnist_b128,mnist_b512,wide_b32 --repeats 30 --seed 1221 \
  --implementations cuda_fused,cuda_tensor,cuda_try_interleaved,cuda_try_half_chunks --json $OUT/predict_backward.json > $OUT/bench.txt 2>&1
grep -E "^predict_backward |copy" $OUT/bench.txt | cut -c1-160
for impl in cuda_tensor cuda_try_half_chunks; do
ncu --kernel-name regex:backward_kernel --launch-count 1 --section WarpStateStats \
  --metrics gpu__time_duration.sum,smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.per_cycle_active,launch__registers_per_thread \
  --page raw $G/halcaps bench --device cuda --op predict_backward --shapes mnist_b128 --implementations $impl --repeats 1 --warmup 0 --seed 1222 > $OUT/ncu_$impl.txt 2>&1
echo "== $impl"; grep -E "gpu__time_duration.sum|smsp__inst_executed.sum |dram__throughput.avg.pct|registers_per_thread |warps_active.avg.pct|issue_active.avg.per_cycle" $OUT/ncu_$impl.txt | awk '{print $1, $NF}'
grep -E "issue_stalled.*per_issue_active.ratio" $OUT/ncu_$impl.txt | sort -u | sort -k3 -g -r | head -4 | awk '{print $1, $NF}'
done

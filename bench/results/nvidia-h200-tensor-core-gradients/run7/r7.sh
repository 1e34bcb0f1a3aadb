#!/bin/bash
# Run 7: the tensor-core forward with the batch split over warps (run 6 had one warp walk a capsule's whole batch:
# 8.7 warps an SM): cuda_tensor 32 rows a warp, uncommitted tries of 16 and 64 rows. Prediction tests, timing, ncu.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[grid],[odd],[device]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
$G/halcaps bench --device cuda --op predict --shapes mnist_b128,mnist_b512,wide_b32 --repeats 30 --seed 1271 \
  --implementations batch_rows,cuda_tuned,cuda_tensor,cuda_try_tensor_16rows,cuda_try_tensor_64rows --json $OUT/predict.json > $OUT/bench.txt 2>&1
grep -E "^predict |copy" $OUT/bench.txt | cut -c1-160
ncu --kernel-name regex:"forward_kernel" --launch-count 1 --section WarpStateStats \
  --metrics gpu__time_duration.sum,smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.per_cycle_active,launch__registers_per_thread,l1tex__throughput.avg.pct_of_peak_sustained_active \
  --page raw $G/halcaps bench --device cuda --op predict --shapes mnist_b128 --implementations cuda_tensor --repeats 1 --warmup 0 --seed 1272 > $OUT/ncu.txt 2>&1
grep -E "gpu__time_duration.sum|smsp__inst_executed.sum |dram__throughput.avg.pct|registers_per_thread |warps_active.avg.pct|issue_active.avg.per_cycle|l1tex__throughput.avg" $OUT/ncu.txt | awk '{print $1, $NF}'
grep -E "issue_stalled.*per_issue_active.ratio" $OUT/ncu.txt | sort -k3 -g -r | head -4 | awk '{print $1, $NF}'

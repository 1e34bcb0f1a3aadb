#!/bin/bash
# Run 5: an uncommitted try beside cuda_tensor: cuda_try_pairs, a pair of warps an input capsule (each half of the
# columns of je for both gradients, grad_u's halves added through shared memory; 96 registers, 9 blocks = 18 warps
# an SM against cuda_tensor's 8.7). The prediction tests, memcheck and racecheck of the try, both timed, ncu.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[grid],[odd],[device]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
$G/halcaps bench --device cuda --op predict_backward --shapes mnist_b128,mnist_b512,wide_b32 --repeats 30 --seed 1251 \
  --implementations cuda_fused,cuda_tensor,cuda_try_pairs --json $OUT/predict_backward.json > $OUT/bench.txt 2>&1
grep -E "^predict_backward |copy" $OUT/bench.txt | cut -c1-160
ncu --kernel-name regex:pair_kernel --launch-count 1 --section WarpStateStats --section Occupancy \
  --metrics gpu__time_duration.sum,smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.per_cycle_active,launch__registers_per_thread \
  --page raw $G/halcaps bench --device cuda --op predict_backward --shapes mnist_b128 --implementations cuda_try_pairs --repeats 1 --warmup 0 --seed 1252 > $OUT/ncu.txt 2>&1
grep -E "gpu__time_duration.sum|smsp__inst_executed.sum |dram__throughput.avg.pct|registers_per_thread |warps_active.avg.pct|issue_active.avg.per_cycle|occupancy_limit" $OUT/ncu.txt | awk '{print $1, $NF}'
grep -E "issue_stalled.*per_issue_active.ratio" $OUT/ncu.txt | sort -u | sort -k3 -g -r | head -5 | awk '{print $1, $NF}'
for shape in 1:1:1:1:1 17:13:7:7:15 33:5:2:3:65 130:7:8:10:16 15:3:1:7:33; do
  for tool in memcheck racecheck synccheck; do
    echo "== $tool $shape" >> $OUT/sanitizer.log
    timeout 100 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op predict_backward \
      --implementations cuda_try_pairs --shapes $shape --repeats 1 --warmup 0 --seed 1253 >> $OUT/sanitizer.log 2>&1
    echo "rc $?" >> $OUT/sanitizer.log
  done
done
grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - - | awk '{$2=""; $3=""; print}' | sort | uniq -c

#!/bin/bash
# Run 6: the prediction's forward on the tensor cores (cuda_tensor, hand-written forward version 3: a warp per input
# capsule with W's split values in registers, 3xTF32, evict-first 8-byte stores). The prediction tests, memcheck and
# racecheck at odd shapes, every implementation of predict timed, ncu of the new kernel and cuda_tuned's.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[grid],[odd],[device],[default],[stream]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
$G/halcaps bench --device cuda --op predict --shapes mnist_b128,mnist_b512,wide_b32 --repeats 30 --seed 1261 \
  --json $OUT/predict.json --markdown $OUT/predict.md > $OUT/bench.txt 2>&1
grep -E "^predict |copy" $OUT/bench.txt | cut -c1-160
for impl in cuda_tensor cuda_tuned; do
ncu --kernel-name regex:"forward_kernel|forward_v2" --launch-count 1 --section WarpStateStats \
  --metrics gpu__time_duration.sum,smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.per_cycle_active,launch__registers_per_thread,l1tex__throughput.avg.pct_of_peak_sustained_active \
  --page raw $G/halcaps bench --device cuda --op predict --shapes mnist_b128 --implementations $impl --repeats 1 --warmup 0 --seed 1262 > $OUT/ncu_$impl.txt 2>&1
echo "== $impl"; grep -E "gpu__time_duration.sum|smsp__inst_executed.sum |dram__throughput.avg.pct|registers_per_thread |warps_active.avg.pct|issue_active.avg.per_cycle|l1tex__throughput.avg" $OUT/ncu_$impl.txt | awk '{print $1, $NF}'
grep -E "issue_stalled.*per_issue_active.ratio" $OUT/ncu_$impl.txt | sort -k3 -g -r | head -4 | awk '{print $1, $NF}'
done
for shape in 1:1:1:1:1 17:13:9:7:15 33:5:2:3:65 130:7:8:10:16 15:3:1:7:33 2:3:16:32:16 7:5:17:3:3; do
  for tool in memcheck racecheck initcheck; do
    echo "== $tool $shape" >> $OUT/sanitizer.log
    timeout 100 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op predict \
      --implementations cuda_tensor --shapes $shape --repeats 1 --warmup 0 --seed 1263 >> $OUT/sanitizer.log 2>&1
    echo "rc $?" >> $OUT/sanitizer.log
  done
done
grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - - | awk '{$2=""; $3=""; print}' | sort | uniq -c

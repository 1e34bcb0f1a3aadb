#!/bin/bash
# Run 4: the committed cuda_tensor (run 1's kernel with run 2's copies of full rows). Every CUDA test; memcheck,
# racecheck, initcheck and synccheck of cuda_tensor at 8 odd shapes; every implementation of predict_backward
# timed (JSON and Markdown for the chart), and ncu of cuda_tensor at MNIST b128.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -60
$G/halcaps bench --device cuda --op predict_backward --shapes mnist_b128,mnist_b512,wide_b32 --repeats 30 --seed 1241 \
  --json $OUT/predict_backward.json --markdown $OUT/predict_backward.md > $OUT/bench.txt 2>&1
grep -E "^predict_backward |copy|check" $OUT/bench.txt | cut -c1-160
ncu --kernel-name regex:backward_kernel --launch-count 1 --section WarpStateStats --section SpeedOfLight --section Occupancy --section LaunchStats \
  --metrics gpu__time_duration.sum,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum \
  --page raw $G/halcaps bench --device cuda --op predict_backward --shapes mnist_b128 --implementations cuda_tensor --repeats 1 --warmup 0 --seed 1242 > $OUT/ncu.txt 2>&1
grep -E "gpu__time_duration.sum|smsp__inst_executed.sum |hmma|dram__throughput.avg.pct|mem_shared.sum|registers_per_thread|warps_active.avg.pct|occupancy_limit" $OUT/ncu.txt | head -20
grep -E "issue_stalled.*ratio" $OUT/ncu.txt | sort -k3 -g -r | head -8
for shape in 1:1:1:1:1 17:13:9:7:15 7:5:17:3:3 33:5:2:3:65 130:7:8:10:16 5:33:7:16:1 15:3:1:7:33 2:3:16:32:16; do
  for tool in memcheck racecheck initcheck synccheck; do
    echo "== $tool $shape" >> $OUT/sanitizer.log
    timeout 100 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op predict_backward \
      --implementations cuda_tensor --shapes $shape --repeats 1 --warmup 0 --seed 1243 >> $OUT/sanitizer.log 2>&1
    echo "rc $?" >> $OUT/sanitizer.log
  done
done
grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - - | awk '{$2=""; $3=""; print}' | sort | uniq -c

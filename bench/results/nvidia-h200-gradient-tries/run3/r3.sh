#!/bin/bash
# Session 2026-11-22d, run 3: `vectors` gradients as committed (the predict_backward default where they fit)
# and the layer backward `rows_vectors` (rows_predict with vectors' grad_u): checks, timing, ncu, sanitizers.
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[grid],[odd],[device],[default],[stream],[digitcaps]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
$G/halcaps bench --device cuda --op predict_backward --shapes mnist_b128,mnist_b512,wide_b32 \
  --implementations tuned,vectors,cuda_blog_naive,cuda_tuned,cuda_fused,cublas --repeats 30 --seed 441 \
  --json $OUT/predict_backward.json --markdown $OUT/predict_backward.md > $OUT/predict_backward.txt 2>&1
cat $OUT/predict_backward.txt
$G/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 \
  --implementations rows_predict,rows_vectors --repeats 30 --seed 442 --json $OUT/digitcaps_backward.json > $OUT/digitcaps.txt 2>&1
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 \
  --implementations fused_split_all_vectors --repeats 30 --seed 442 --json $OUT/digitcaps.json >> $OUT/digitcaps.txt 2>&1
cat $OUT/digitcaps.txt
ncu --kernel-name regex:_kernel_grad --metrics gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed \
  $G/halcaps bench --device cuda --op predict_backward --shapes mnist_b128 --implementations tuned,vectors --repeats 1 --warmup 0 --seed 443 > $OUT/ncu.txt 2>&1
grep -E "^  _kernel|gpu__time|dram__|l1tex|registers|warps_active" $OUT/ncu.txt | grep -A5 "_kernel_grad" | grep -v "^--" | awk '/_kernel/{k=$1" "$2" "$3" "$4} /gpu__time/{t=$NF} /l1tex/{l=$NF} /dram/{d=$NF} /warps_active/{w=$NF; print k, "us="t, "dram%="d, "l1%="l, "warps%="w}' > $OUT/ncu_kernels.txt; cat $OUT/ncu_kernels.txt
for tool in memcheck racecheck; do
  echo "== $tool predict_backward vectors" >> $OUT/sanitizer.log
  timeout 200 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op predict_backward --implementations vectors \
    --shapes 6:5:16:3:16,3:5:8:3:12,17:33:8:10:16,130:7:8:3:16 --repeats 1 --warmup 0 --seed 444 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
done
for tool in memcheck racecheck; do
  echo "== $tool digitcaps_backward rows_vectors" >> $OUT/sanitizer.log
  timeout 200 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op digitcaps_backward --implementations rows_vectors \
    --shapes 17:33:8:10:16,3:20:8:10:12 --repeats 1 --warmup 0 --seed 445 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
done
grep -E "==|ERROR SUMMARY|RACECHECK SUMMARY|rc |check" $OUT/sanitizer.log | grep -v "^halcaps" | head -40

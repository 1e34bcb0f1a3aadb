#!/bin/bash
# Run 5: the committed cuda_staged (forward version 3). CUDA tests of the prediction,
# compute-sanitizer over the staged tests and at bench shapes, then every forward
# implementation timed on the standard shapes, with a chart.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[grid],[odd],[device],[stream],[staged],[default]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
for tool in memcheck racecheck initcheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool $G/halcaps_cuda_tests "[staged]" 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test cases" | sed "s/^/$tool [staged]: /" | tee -a $OUT/sanitizer.log
done
for shape in mnist_b128 130:37:8:11:16 1000:3:8:1:4; do
  for tool in memcheck racecheck; do
    timeout 100 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op predict --implementations cuda_staged \
      --shapes $shape --repeats 1 --warmup 0 --seed 2211 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY" | sed "s/^/$tool $shape: /" | tee -a $OUT/sanitizer.log
  done
done
$G/halcaps bench --device cuda --op predict --shapes mnist_b128,mnist_b512,wide_b32 --repeats 30 --seed 2212 \
  --json $OUT/predict.json --markdown $OUT/predict.md > $OUT/predict.txt 2>&1
grep -E "^predict |copy" $OUT/predict.txt

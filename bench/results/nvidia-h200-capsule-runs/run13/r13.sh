#!/bin/bash
# Run 13: the committed binaries: capsule_runs with its u tile copied by every thread of the block (copy_all). Every
# CUDA test; compute-sanitizer over the [runs] tests and at
# bench shapes; every forward implementation on the standard shapes (chart: predict.png, drawn from predict.json
# on the build machine) and capsule_runs against batch_rows, batch_vectors and cuda_staged at four more.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
for tool in memcheck racecheck initcheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool $G/halcaps_cuda_tests "[runs]" 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test cases" | sed "s/^/$tool [runs]: /" | tee -a $OUT/sanitizer.log
done
for shape in mnist_b128 mnist_b512 wide_b32 130:38:8:11:16 1:1:1:1:1 6:4:8:64:16; do
  for tool in memcheck racecheck; do
    timeout 100 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op predict --implementations capsule_runs \
      --shapes $shape --repeats 1 --warmup 0 --seed 4301 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY" | sed "s/^/$tool $shape: /" | tee -a $OUT/sanitizer.log
  done
done
$G/halcaps bench --device cuda --op predict --shapes mnist_b128,mnist_b512,wide_b32 --repeats 30 --seed 4302 \
  --json $OUT/predict.json --markdown $OUT/predict.md > $OUT/predict.txt 2>&1
$G/halcaps bench --device cuda --op predict --shapes 256:1152:8:10:16,128:1152:8:32:16,1024:1152:8:10:16,128:1152:16:10:16 \
  --implementations capsule_runs,batch_rows,batch_vectors,cuda_staged --repeats 30 --seed 4303 > $OUT/predict_more.txt 2>&1
grep -hE "^predict |copy" $OUT/predict.txt $OUT/predict_more.txt | grep -E "copy|capsule_runs|batch_rows|cuda_staged|cublas |blog"

#!/bin/bash
# Run 4: capsule_runs with its u tile copied 4 floats a thread, 4 pieces in flight (copy_unroll=4), the split
# factors kept positive at every shape (run 3's two failures at 1:1:1:1:1), the default up to out_caps * out_dim
# 256. Every CUDA test; compute-sanitizer over the [runs] tests and at bench shapes; every forward implementation
# on the standard shapes and capsule_runs against batch_rows at three more; the copy knobs
# (`halcaps explore build --space schedules/spaces/capsule_predict_cuda_runs.space --out /tmp/xr`).
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
for tool in memcheck racecheck initcheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool $G/halcaps_cuda_tests "[runs]" 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test cases" | sed "s/^/$tool [runs]: /" | tee -a $OUT/sanitizer.log
done
for shape in mnist_b128 mnist_b512 130:38:8:11:16 1:1:1:1:1; do
  for tool in memcheck racecheck; do
    timeout 100 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op predict --implementations capsule_runs \
      --shapes $shape --repeats 1 --warmup 0 --seed 3401 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY" | sed "s/^/$tool $shape: /" | tee -a $OUT/sanitizer.log
  done
done
$G/halcaps bench --device cuda --op predict --shapes mnist_b128,mnist_b512,wide_b32 --repeats 30 --seed 3402 \
  --json $OUT/predict.json --markdown $OUT/predict.md > $OUT/predict.txt 2>&1
$G/halcaps bench --device cuda --op predict --shapes 256:1152:8:10:16,128:1152:8:32:16,1024:1152:8:10:16 \
  --implementations capsule_runs,batch_rows,cuda_staged --repeats 30 --seed 3403 > $OUT/predict_more.txt 2>&1
grep -hE "^predict |copy" $OUT/predict.txt $OUT/predict_more.txt | grep -E "copy|capsule_runs|batch_rows|cuda_staged|cublas "
rm -rf /tmp/xr && (cd /tmp && xz -dc $OLDPWD/.gpu/explore_runs.tar.xz | tar xf -)
mkdir -p /tmp/ex
for shape in mnist_b128 mnist_b512; do
  $G/halcaps explore run /tmp/xr --shape $shape --repeats 30 --seed 3404 > /tmp/ex/explore_$shape.txt 2>&1
  echo "rc $?" >> /tmp/ex/explore_$shape.txt
  echo "== $shape"; grep -E "^\[" /tmp/ex/explore_$shape.txt | awk '{print $4, $2}' | sort -n | head -16
done
(cd /tmp/ex && tar cf $OUT/explore.tar .)

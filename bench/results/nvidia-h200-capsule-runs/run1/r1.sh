#!/bin/bash
# Run 1: the capsule-runs space (schedules/spaces/capsule_predict_cuda_runs.space, 32 points, built with
# `halcaps explore build --space ... --schedule batch_rows --schedule batch_walk --out /tmp/xr` on the build machine)
# checked and timed at MNIST b128 and b512, checked at wide b32 and an odd shape (their guarded paths);
# then `halcaps bench` of the fastest forwards in the same run.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
rm -rf /tmp/xr && (cd /tmp && xz -dc $OLDPWD/.gpu/explore_runs.tar.xz | tar xf -)
for shape in mnist_b128 mnist_b512 wide_b32 130:37:8:11:16; do
  tag=$(echo $shape | tr ':' '_')
  $G/halcaps explore run /tmp/xr --shape $shape --repeats 30 --seed 3101 > $OUT/explore_$tag.txt 2>&1
  echo "rc $?" >> $OUT/explore_$tag.txt
  mkdir -p $OUT/$tag && cp /tmp/xr/results.csv /tmp/xr/results.json /tmp/xr/best.txt $OUT/$tag/ 2>/dev/null
done
$G/halcaps bench --device cuda --op predict --shapes mnist_b128,mnist_b512 \
  --implementations cuda_staged,cuda_tuned,batch_rows,batch_walk --repeats 30 --seed 3102 > $OUT/predict.txt 2>&1
grep -hE "^predict |copy" $OUT/predict.txt
for f in $OUT/explore_*.txt; do echo "== $f"; tail -4 $f; done

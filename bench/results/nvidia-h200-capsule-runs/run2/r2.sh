#!/bin/bash
# Run 2: the capsule-runs space with its staging knobs (u through L1 or staged, the tile staged 16 rows at a
# time or whole; schedules/spaces/capsule_predict_cuda_runs.space, 48 points, built with `halcaps explore build
# --space ... --schedule batch_rows --out /tmp/xr`) checked and timed at MNIST b128 and b512, checked at an odd
# shape; then `halcaps bench` of the fastest forwards in the same run.
G=/tmp/bin; mkdir -p $G; for b in halcaps; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
rm -rf /tmp/xr && (cd /tmp && xz -dc $OLDPWD/.gpu/explore_runs.tar.xz | tar xf -)
for shape in mnist_b128 mnist_b512 130:37:8:11:16; do
  tag=$(echo $shape | tr ':' '_')
  $G/halcaps explore run /tmp/xr --shape $shape --repeats 30 --seed 3201 > $OUT/explore_$tag.txt 2>&1
  echo "rc $?" >> $OUT/explore_$tag.txt
  mkdir -p /tmp/res/$tag && cp /tmp/xr/results.csv /tmp/xr/results.json /tmp/xr/best.txt /tmp/res/$tag/
done
(cd /tmp/res && tar cf $OUT/explore_results.tar .)
$G/halcaps bench --device cuda --op predict --shapes mnist_b128,mnist_b512 \
  --implementations cuda_staged,batch_rows --repeats 30 --seed 3202 > $OUT/predict.txt 2>&1
grep -hE "^predict |copy" $OUT/predict.txt
for f in $OUT/explore_*.txt; do echo "== $f"; grep -E "^\[" $f | awk '{print $4, $2}' | sort -n | head -8; done

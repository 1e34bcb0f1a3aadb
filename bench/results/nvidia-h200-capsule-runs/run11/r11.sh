#!/bin/bash
# Run 11: capsule runs with the u rows read through L1 instead of staged, the staged tile copied by every
# thread of the block, and rows walked 1, 2 or 4 at a time (run11/runs_u.space, 24 points), at MNIST b128
# and b512, then capsule_runs and cuda_staged by `halcaps bench` in the same call. Built with
# `halcaps explore build --space bench/results/nvidia-h200-capsule-runs/run11/runs_u.space --out /tmp/xr`
# and carried as .gpu/explore_runs.tar.xz.
G=/tmp/bin; mkdir -p $G; for b in halcaps; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
rm -rf /tmp/xr && (cd /tmp && xz -dc $OLDPWD/.gpu/explore_runs.tar.xz | tar xf -)
for shape in mnist_b128 mnist_b512; do
  $G/halcaps explore run /tmp/xr --shape $shape --repeats 30 --seed 4101 > $OUT/explore_$shape.txt 2>&1
  echo "rc $?" >> $OUT/explore_$shape.txt
  echo "== $shape"; grep -E "^\[" $OUT/explore_$shape.txt | awk '{print $4, $2}' | sort -n | head -24
done
$G/halcaps bench --device cuda --op predict --shapes mnist_b128,mnist_b512 \
  --implementations capsule_runs,cuda_staged --repeats 30 --seed 4102 > $OUT/predict.txt 2>&1
grep -hE "^predict |copy" $OUT/predict.txt

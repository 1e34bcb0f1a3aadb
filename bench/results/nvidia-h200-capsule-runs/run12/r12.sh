#!/bin/bash
# Run 12: capsule runs with the u tile copied by every thread of the block (copy_all, the winner of run 11),
# around capsule_runs' grid (run_caps 1-4, row_groups 1-4), with the copy unrolled 1, 4 or 8 floats a
# thread (run12/runs_copy.space, 27 points, and capsule_runs as a row), at MNIST b128 and b512, two passes.
# Built with `halcaps explore build --space bench/results/nvidia-h200-capsule-runs/run12/runs_copy.space
# --schedule capsule_runs --out /tmp/xr` and carried as .gpu/explore_runs.tar.xz.
G=/tmp/bin; mkdir -p $G; for b in halcaps; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
rm -rf /tmp/xr && (cd /tmp && xz -dc $OLDPWD/.gpu/explore_runs.tar.xz | tar xf -)
for pass in 1 2; do
  for shape in mnist_b128 mnist_b512; do
    f=$OUT/explore_${shape}_pass$pass.txt
    $G/halcaps explore run /tmp/xr --shape $shape --repeats 30 --seed 42$pass > $f 2>&1
    echo "rc $?" >> $f
    echo "== $shape pass $pass"; grep -E "^\[" $f | awk '{print $4, $2}' | sort -n | head -8
    grep -E "^\[" $f | grep "capsule_runs " | awk '{print $4, $2}'
  done
done

#!/bin/bash
# Run 9: the capsule-runs space at out_caps x out_dim 512, where capsule_runs lost: wide b32 (in_dim 16) and
# 128:1152:8:32:16. The space is run9/wide.space (72 points, batch_vectors as a row), built with
# `halcaps explore build --space bench/results/nvidia-h200-capsule-runs/run9/wide.space --schedule batch_vectors --out /tmp/xw`
# and carried as .gpu/explore_wide.tar.xz; run 7's binaries.
G=/tmp/bin; mkdir -p $G; for b in halcaps; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
rm -rf /tmp/xw && (cd /tmp && xz -dc $OLDPWD/.gpu/explore_wide.tar.xz | tar xf -)
for shape in wide_b32 128:1152:8:32:16; do
  tag=$(echo $shape | tr ':' '_')
  $G/halcaps explore run /tmp/xw --shape $shape --repeats 30 --seed 3901 > $OUT/explore_$tag.txt 2>&1
  echo "rc $?" >> $OUT/explore_$tag.txt
  echo "== $shape"; grep -E "^\[" $OUT/explore_$tag.txt | awk '{print $4, $2}' | sort -n | head -10
done
$G/halcaps bench --device cuda --op predict --shapes wide_b32,128:1152:8:32:16 \
  --implementations capsule_runs,batch_rows,batch_vectors,cuda_tuned --repeats 30 --seed 3902 > $OUT/predict.txt 2>&1
grep -hE "^predict |copy" $OUT/predict.txt

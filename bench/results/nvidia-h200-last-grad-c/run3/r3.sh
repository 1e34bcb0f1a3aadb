#!/bin/bash
# Session 2026-11-22g, run 5 of the session: the committed layer backward (the last grad_c in the agreements'
# Tuple, s given; the same kernels as run 1, PTX identical) against the previous commit's binary (b311efd,
# .gpu/halcaps_old.xz), alternating, two rounds; the forward defaults in the same run for the ratios.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_old; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
for round in 1 2; do
  for bin in halcaps_old halcaps; do
    echo "== round $round $bin" >> $OUT/bench.txt
    $G/$bin bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --implementations rows_vectors \
      --repeats 30 --seed 74$round --json $OUT/backward_${bin}_$round.json >> $OUT/bench.txt 2>&1
  done
  echo "== round $round forward" >> $OUT/bench.txt
  $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations fused_split_all_vectors \
    --repeats 30 --seed 74$round >> $OUT/bench.txt 2>&1
done
grep -E "^== |^digitcaps|copy" $OUT/bench.txt

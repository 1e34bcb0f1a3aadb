#!/bin/bash
# Session 2026-11-22g, run 7 of the session: the forward default against the PyTorch peers in one run (issue 4's
# ratios): halcaps bench of the layer forward, then bench/pytorch_digitcaps.py (eager and torch.compile), twice.
G=/tmp/bin; mkdir -p $G; xz -dc .gpu/halcaps.xz > $G/halcaps && chmod +x $G/halcaps
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
for round in 1 2; do
  echo "== round $round" >> $OUT/bench.txt
  $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations fused_split_all_vectors \
    --repeats 30 --seed 76$round >> $OUT/bench.txt 2>&1
  echo "== round $round pytorch" >> $OUT/pytorch.txt
  python3 bench/pytorch_digitcaps.py --shapes 128 512 --repeats 30 >> $OUT/pytorch.txt 2>&1
done
grep -E "^== |^digitcaps " $OUT/bench.txt; cat $OUT/pytorch.txt

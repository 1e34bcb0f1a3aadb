#!/bin/bash
# Session 2026-11-22h, run 6: the committed binary (ce52644's kernels; the run-5 build, whose PTX is the
# committed one): the prediction's gradients, every implementation, on the standard shapes, for the chart.
G=/tmp/bin; mkdir -p $G; for b in halcaps; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps bench --device cuda --op predict_backward --shapes mnist_b128,mnist_b512,wide_b32 --repeats 30 --seed 811 \
  --json $OUT/predict_backward.json --markdown $OUT/predict_backward.md > $OUT/bench.txt 2>&1
grep -E "^predict|copy" $OUT/bench.txt

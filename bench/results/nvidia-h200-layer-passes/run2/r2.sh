#!/bin/bash
# Run 2: run 1's build, ncu's per-instruction counts (SourceCounters) of the pass kernel with the logits at MNIST b128,
# exported as CSV; regions.txt sums them by stretches of code that run equally often.
G=/tmp/bin
ncu --kernel-name regex:pass_kernel --launch-skip 1 --launch-count 1 --section SourceCounters --section InstructionStats -o $OUT/pairs $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 --implementations cuda_tensor --repeats 1 --warmup 0 > $OUT/log.txt 2>&1
ncu -i $OUT/pairs.ncu-rep --page source --print-source sass --csv > $OUT/sass.csv 2>&1

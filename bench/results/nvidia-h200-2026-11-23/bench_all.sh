#!/bin/bash
# Every operator, shape and implementation in one `halcaps bench` run, with the binaries of the commit that adds
# this script (.gpu/halcaps.xz). Outputs: bench.json, bench.md, bench.txt.
G=/tmp/bin; mkdir -p $G; xz -dc .gpu/halcaps.xz > $G/halcaps && chmod +x $G/halcaps
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 580 $G/halcaps bench --device cuda --repeats 30 --seed 2311 --json $OUT/bench.json --markdown $OUT/bench.md \
  > $OUT/bench.txt 2>&1; echo "rc $?" >> $OUT/bench.txt
tail -4 $OUT/bench.txt; grep -c "^[a-z_]* " $OUT/bench.txt

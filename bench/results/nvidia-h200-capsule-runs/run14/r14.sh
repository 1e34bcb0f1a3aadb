#!/bin/bash
# Run 14: where the runtime's default should stop taking capsule_runs. Its cut is at out_caps x out_dim 256,
# set from 160 (won) and 512 (lost) only. capsule_runs against batch_rows (in_dim 8) and batch_vectors
# (in_dim 16, where batch_rows has no fast path) at out_caps 12 to 32 (out_dim 16), batch 128 and 512.
# The committed binaries of run 13.
G=/tmp/bin; mkdir -p $G; for b in halcaps; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
for K in 8 16; do
  other=batch_rows; [ $K = 16 ] && other=batch_vectors
  shapes=""
  for B in 128 512; do for J in 12 16 20 24 28 32; do shapes="$shapes,$B:1152:$K:$J:16"; done; done
  $G/halcaps bench --device cuda --op predict --shapes ${shapes#,} --implementations capsule_runs,$other \
    --repeats 30 --seed 441$K > $OUT/cut_in_dim$K.txt 2>&1
  echo "rc $?" >> $OUT/cut_in_dim$K.txt
  grep -hE "^predict " $OUT/cut_in_dim$K.txt | awk '{print $2, $3, $6}'
done

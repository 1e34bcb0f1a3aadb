#!/bin/bash
# Session 2026-11-21b, run 8: partial-sum threads with 2 e values (e2: 16 batch elements, e2b8: 8) against 1 e and 32.
G="$(cd "$(dirname "$0")" && pwd)"
cd "$G/.."
$G/halcaps_cuda_tests "[digitcaps]" > $OUT/cuda_tests_digitcaps.log 2>&1; echo "rc $?" >> $OUT/cuda_tests_digitcaps.log
tail -3 $OUT/cuda_tests_digitcaps.log
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 \
  --implementations fused_split_vectors,fused_split_vectors_e2,fused_split_vectors_e2b8 --repeats 30 --seed 271 > $OUT/e2.txt 2>&1
cat $OUT/e2.txt
for v in fused_split_vectors_e2 fused_split_vectors_e2b8; do
ncu --metrics gpu__time_duration.sum,l1tex__throughput.avg.pct_of_peak_sustained_active \
  $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 --implementations $v --repeats 1 --warmup 0 --seed 272 > $OUT/ncu_$v.txt 2>&1
grep -E "^  _kernel|duration|l1tex" $OUT/ncu_$v.txt | tail -36 | grep -A2 "s_intm_global_wrapper__0_s0_io1"
done

#!/bin/bash
# Run 9: run 8's one failure (the test case "cuda_tensor's MNIST variant at odd sizes past 64 rows" at seed
# 1491354532: B=192 I=23 K=5 J=10 E=9, 5 iterations, b0, u scale 1e15) again with three test binaries: run 8's
# (.gpu/halcaps_cuda_tests.xz: 2 stages on short chunks, W split truncated), 5e7a3e1's (3 stages, W split
# truncated) and c2b4824's (3 stages, W split rounded); then the case at 12 fresh seeds with each.
G=/tmp/bin; mkdir -p $G
for b in halcaps_cuda_tests tests_5e7a3e1 tests_c2b4824; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
case="cuda digitcaps: cuda_tensor's MNIST variant at odd sizes past 64 rows"
for b in halcaps_cuda_tests tests_5e7a3e1 tests_c2b4824; do
  HALCAPS_TEST_SEED=1491354532 timeout 60 $G/$b "$case" > $OUT/seed_1491354532_$b.log 2>&1
  echo "== $b seed 1491354532: rc $? $(grep -E 'test cases|rel l2' $OUT/seed_1491354532_$b.log | tr '\n' ' ')"
done
for b in halcaps_cuda_tests tests_5e7a3e1 tests_c2b4824; do
  fails=0
  for n in $(seq 1 12); do
    HALCAPS_TEST_SEED=$((7000 + n)) timeout 60 $G/$b "$case" > /tmp/one.log 2>&1 || { fails=$((fails + 1)); grep -E "seed|B=|rel l2" /tmp/one.log | head -3 >> $OUT/fresh_seed_failures.log; }
  done
  echo "== $b: $fails of 12 seeds (7001-7012) failed"
done

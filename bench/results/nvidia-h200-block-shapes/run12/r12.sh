#!/bin/bash
# Run 12: the test case "cuda_tensor's MNIST variant at odd sizes past 64 rows" at 1 and 3 iterations (5 dropped
# from it, runs 9-11), with require_close_conditioned, at 40 seeds (7001-7040), then the [digitcaps] tests
# (.gpu/halcaps_cuda_tests.xz).
G=/tmp/bin; mkdir -p $G; xz -dc .gpu/halcaps_cuda_tests.xz > $G/halcaps_cuda_tests && chmod +x $G/halcaps_cuda_tests
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
case="cuda digitcaps: cuda_tensor's MNIST variant at odd sizes past 64 rows"
fails=0
for n in $(seq 7001 7040); do
  HALCAPS_TEST_SEED=$n timeout 60 $G/halcaps_cuda_tests "$case" > /tmp/one.log 2>&1 || { fails=$((fails + 1)); echo "seed $n" >> $OUT/seed_failures.log; grep -E "B=|rel l2" /tmp/one.log | head -3 >> $OUT/seed_failures.log; }
done
echo "== the case at 40 seeds: $fails failed"
timeout 200 $G/halcaps_cuda_tests "[digitcaps]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log

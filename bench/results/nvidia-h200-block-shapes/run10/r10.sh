#!/bin/bash
# Run 10: the test case "cuda_tensor's MNIST variant at odd sizes past 64 rows" checked with
# require_close_conditioned (the nudged reference's allowance for ill-conditioned 5-iteration routing), with the
# staging-depth change (.gpu/halcaps_cuda_tests.xz): run 9's failing seeds 7001 and 7012, 24 fresh seeds, then
# every CUDA test.
G=/tmp/bin; mkdir -p $G; xz -dc .gpu/halcaps_cuda_tests.xz > $G/halcaps_cuda_tests && chmod +x $G/halcaps_cuda_tests
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
case="cuda digitcaps: cuda_tensor's MNIST variant at odd sizes past 64 rows"
fails=0
for n in 7001 7012 $(seq 7013 7036); do
  HALCAPS_TEST_SEED=$n timeout 60 $G/halcaps_cuda_tests "$case" > /tmp/one.log 2>&1 || { fails=$((fails + 1)); echo "seed $n" >> $OUT/seed_failures.log; grep -E "B=|rel l2|change" /tmp/one.log | head -4 >> $OUT/seed_failures.log; }
done
echo "== the case at 26 seeds (7001, 7012, 7013-7036): $fails failed"
timeout 500 $G/halcaps_cuda_tests > $OUT/cuda_tests_all.log 2>&1; echo "rc $?" >> $OUT/cuda_tests_all.log
tail -3 $OUT/cuda_tests_all.log; grep -B3 -A14 FAILED $OUT/cuda_tests_all.log | head -40

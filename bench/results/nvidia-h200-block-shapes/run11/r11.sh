#!/bin/bash
# Run 11: is run 10's remaining failure rate (the test case "cuda_tensor's MNIST variant at odd sizes past 64
# rows", now with require_close_conditioned) the kernels' of this session or older? The case at the same 40 seeds
# (7001-7040) with run 10's test binary (.gpu/halcaps_cuda_tests.xz: W split truncated, reciprocal by MUFU.RCP,
# staging depth by chunk) and with c2b4824's kernels under the same test (.gpu/tests_c2b4824.xz).
G=/tmp/bin; mkdir -p $G
for b in halcaps_cuda_tests tests_c2b4824; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
case="cuda digitcaps: cuda_tensor's MNIST variant at odd sizes past 64 rows"
for b in halcaps_cuda_tests tests_c2b4824; do
  fails=0
  for n in $(seq 7001 7040); do
    HALCAPS_TEST_SEED=$n timeout 60 $G/$b "$case" > /tmp/one.log 2>&1 || { fails=$((fails + 1)); echo "$b seed $n" >> $OUT/seed_failures.log; grep -E "B=|rel l2" /tmp/one.log | head -3 >> $OUT/seed_failures.log; }
  done
  echo "== $b: $fails of 40 seeds failed"
done

#!/bin/bash
# Run 17: the [default] CUDA cases with two more forward shapes at in_dim 8 past out_caps x out_dim 256
# (128:6:8:32:16, where the default is batch_rows, and 256:6:8:24:16, where it is capsule_runs), with u_hat on
# and off an 8-byte boundary; memcheck of the same cases. The committed test binary.
G=/tmp/bin; mkdir -p $G; for b in halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[default]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
timeout 200 compute-sanitizer --tool memcheck $G/halcaps_cuda_tests "[default]" 2>&1 | grep -E "ERROR SUMMARY|test cases" | sed "s/^/memcheck [default]: /" | tee $OUT/sanitizer.log

#!/bin/bash
# Run 16: the committed binaries, with the runtime's capsule_runs default placed by runs 14-15 (kernels as in
# run 13). Every CUDA test (a new [default] case at 64:6:16:10:16, where the default is now batch_vectors);
# memcheck of the [default] cases.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
timeout 200 compute-sanitizer --tool memcheck $G/halcaps_cuda_tests "[default]" 2>&1 | grep -E "ERROR SUMMARY|test cases" | sed "s/^/memcheck [default]: /" | tee $OUT/sanitizer.log

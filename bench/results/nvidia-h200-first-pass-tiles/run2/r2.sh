#!/bin/bash
# Run 2: run 1's binaries again (run 1's test call hit its 200 s timeout before Catch2 printed anything): every
# CUDA test, then ncu's warp-state and compute-workload sections on the first pass and the first pass with the
# logits of one cuda_tensor call at MNIST b128 (which pipe is busy, and what the warps wait on).
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 420 $G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
timeout 150 ncu --kernel-name regex:pass_kernel --launch-count 2 --section WarpStateStats --section ComputeWorkloadAnalysis \
  $G/halcaps bench --device cuda --op digitcaps --implementations cuda_tensor --shapes mnist_b128 --repeats 1 --warmup 0 \
  --seed 6201 > $OUT/ncu_sections.txt 2>&1
grep -E "pass_kernel|Duration|Stall|Pipe|Issue|Warp Cycles|Executed Ipc|Tensor" $OUT/ncu_sections.txt | cut -c1-150 | head -60

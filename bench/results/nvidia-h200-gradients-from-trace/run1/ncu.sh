#!/usr/bin/env bash
# Run 1b: ncu's sections for the tensor-core gradients kernel, once with g
# from the routing trace (digitcaps_backward, MNIST b128) and once with g
# in memory (predict_backward, MNIST b128), from the same binary as run 1.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-gradients-from-trace/run1}
mkdir -p "$out" /tmp/bin
xz -dc .gpu/halcaps.xz > /tmp/bin/halcaps; chmod +x /tmp/bin/halcaps
for op in digitcaps_backward predict_backward; do
    timeout 120 ncu --kernel-name-base demangled --kernel-name regex:backward_kernel --launch-count 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
        --section LaunchStats --section SchedulerStats --section ComputeWorkloadAnalysis \
        /tmp/bin/halcaps bench --device cuda --op $op --shapes mnist_b128 --repeats 1 --implementations cuda_tensor \
        > "$out/ncu_$op.txt" 2>&1
    echo "rc $?" >> "$out/ncu_$op.txt"
done
grep -E "Duration|Memory Throughput|L1/TEX Hit|L2 Hit|Achieved Occupancy|Registers Per|Stall|Warp Cycles Per Issued|Issued Ipc|L1/TEX Cache Throughput|L2 Cache Throughput|DRAM Throughput|rc " "$out"/ncu_*.txt

#!/bin/bash
# Run 6: after the review's mends (host code shared by cuda_fused and cuda_tensor in digitcaps_shared.cuh:
# the iteration loop, the refusal, the SM count; cuda_tensor's i-lane sums added over a flat view of its
# registers, the same 239 registers and no spills). Every CUDA test; memcheck and racecheck of both fused layers
# at two shapes; the two hand-written fused layers and the Halide default timed once more.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
for impl in cuda_tensor cuda_fused; do for shape in 130:37:8:11:16 17:11:3:11:5; do for tool in memcheck racecheck; do
  echo "== $tool $impl $shape" >> $OUT/sanitizer.log
  timeout 100 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op digitcaps \
    --implementations $impl --shapes $shape --repeats 1 --warmup 0 --seed 1021 >> $OUT/sanitizer.log 2>&1
  echo "rc $?" >> $OUT/sanitizer.log
done; done; done
grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - - | awk '{$2=""; $3=""; $4=""; print}' | sort | uniq -c
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_tensor,cuda_fused,fused_split_all_vectors \
  --repeats 30 --seed 1022 > $OUT/bench.txt 2>&1
grep -E "^digitcaps |copy" $OUT/bench.txt

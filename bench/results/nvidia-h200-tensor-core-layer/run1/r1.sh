#!/bin/bash
# Run 1: the first build of cuda_tensor (3xTF32 mma pass kernel). The layer tests (every implementation, so
# cuda_tensor too), then cuda_tensor beside cuda_fused and the Halide default, its block shapes
# (HALCAPS_TENSOR_BLOCK = row tiles, i-lanes; an exploration switch of this build only), and ncu's kernel times.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 300 $G/halcaps_cuda_tests "[digitcaps]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B5 -A15 FAILED $OUT/cuda_tests.log | head -60
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_tensor,cuda_fused,fused_split_all_vectors \
  --repeats 30 --seed 1001 > $OUT/bench.txt 2>&1
grep -E "^digitcaps |copy" $OUT/bench.txt
for blk in 14 12 24 18 22; do
  echo "block $blk"; HALCAPS_TENSOR_BLOCK=$blk $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_tensor \
  --repeats 30 --seed 1002 2>&1 | grep -E "^digitcaps " | tee -a $OUT/blocks.txt
done
ncu --kernel-name regex:"pass_kernel|squash" --launch-count 12 $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 --implementations cuda_tensor --repeats 1 --warmup 0 > $OUT/ncu.txt 2>&1
grep -E "pass_kernel|squash_kernel|Duration|Registers Per|Achieved Occupancy|Compute \(SM\) Throughput|Memory Throughput" $OUT/ncu.txt | head -60

#!/bin/bash
# Run 1: cuda_tensor (the layer) with each row tile's output capsules split over a pair of warps (128 registers,
# 16 warps an SM; the softmax's max and sum exchanged through shared memory). Layer tests, sanitizers at odd shapes,
# block shapes (row tiles x i-lanes pairs), then ncu of the pass kernel at MNIST b128.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 300 $G/halcaps_cuda_tests "[digitcaps]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B5 -A15 FAILED $OUT/cuda_tests.log | head -60
for shape in 1:1:1:1:1 130:37:8:11:16 37:7:16:16:16 33:9:9:3:9 17:11:3:11:5 5:3:8:1:16; do
  for tool in memcheck racecheck synccheck; do
    echo "== $tool $shape" >> $OUT/sanitizer.log
    timeout 100 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op digitcaps \
      --implementations cuda_tensor --shapes $shape --repeats 1 --warmup 0 --seed 2011 >> $OUT/sanitizer.log 2>&1
    echo "rc $?" >> $OUT/sanitizer.log
  done
done
grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - - | awk '{$2=""; $3=""; print}' | sort | uniq -c
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --repeats 30 --seed 2012 > $OUT/bench.txt 2>&1
grep -E "^digitcaps |copy" $OUT/bench.txt
for blk in 12 21 14; do
  echo "block $blk"; HALCAPS_TENSOR_BLOCK=$blk $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_tensor \
  --repeats 30 --seed 2013 2>&1 | grep -E "^digitcaps " | tee -a $OUT/blocks.txt
done
ncu --kernel-name regex:"pass_kernel|squash" --launch-count 4 $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 --implementations cuda_tensor --repeats 1 --warmup 0 > $OUT/ncu.txt 2>&1
grep -E "pass_kernel|squash_kernel|Duration|Registers Per|Achieved Occupancy|Compute \(SM\) Throughput" $OUT/ncu.txt | cut -c1-100 | head -30
ncu --section WarpStateStats --section InstructionStats --page raw --kernel-name regex:pass_kernel --launch-skip 1 --launch-count 1 $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 --implementations cuda_tensor --repeats 1 --warmup 0 > $OUT/ncu_stalls.txt 2>&1
grep -E "inst_executed.sum |issue_active.avg|issue_stalled.*ratio" $OUT/ncu_stalls.txt | awk '{print $1, $NF}' | sort -k2 -g -r | head -14

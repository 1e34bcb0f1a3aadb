#!/bin/bash
# Session 2026-11-22i, run 7: the committed binaries after a review fix: cuda_fused's fast path copied the tile's
# u rows with one copy a thread, so at out_caps 1 (32 threads) only half of a full tile's 64 copies were made (no
# test had out_caps 1 with in_dim 8, out_dim 16 and more than 16 batch rows; now {33, 9, 8, 1, 16} does). Every
# CUDA test; memcheck and racecheck at out_caps 1; the layer forward (every implementation) at MNIST b128 and b512.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
for shape in 33:9:8:1:16 100:20:8:1:16; do
  for tool in memcheck racecheck; do
    echo "== $tool $shape" >> $OUT/sanitizer.log
    timeout 100 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op digitcaps \
      --implementations cuda_fused --shapes $shape --repeats 1 --warmup 0 --seed 961 >> $OUT/sanitizer.log 2>&1
    echo "rc $?" >> $OUT/sanitizer.log
  done
done
grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - - | awk '{$2=""; $3=""; print}' | sort | uniq -c
grep -E "^digitcaps" $OUT/sanitizer.log | awk '{print $2, $3, $5}'
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --repeats 30 --seed 962 \
  --json $OUT/digitcaps.json --markdown $OUT/digitcaps.md > $OUT/bench.txt 2>&1
grep -E "^digitcaps |copy" $OUT/bench.txt

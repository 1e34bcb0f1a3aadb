#!/bin/bash
# Run 1: both prediction gradients in one Halide pipeline (capsule_predict_backward: fused, fused_c16,
# fused_c64). Every CUDA test; memcheck and racecheck of the fused schedules at five shapes; then
# predict_backward with every implementation at MNIST b128, b512 and wide b32.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps bench --device cuda --op predict_backward --shapes mnist_b128,mnist_b512,wide_b32 --repeats 30 --seed 6101 \
  --json $OUT/bench.json --markdown $OUT/bench.md > $OUT/bench.txt 2>&1; echo "rc $?" >> $OUT/bench.txt
grep -E "^predict_backward|copy|rc " $OUT/bench.txt | head -60
for shape in 1:1:1:1:1 33:5:2:3:65 130:37:8:11:16 17:13:9:7:15 128:64:8:10:16; do
  for impl in fused fused_c16 fused_c64; do
    for tool in memcheck racecheck; do
      timeout 30 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op predict_backward --implementations $impl \
        --shapes $shape --repeats 1 --warmup 0 --seed 6102 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY" | sed "s/^/$tool $impl $shape: /" >> $OUT/sanitizer.log
    done
  done
done
grep -c " 0 errors\| 0 hazards" $OUT/sanitizer.log; grep -v " 0 errors\| 0 hazards" $OUT/sanitizer.log
timeout 280 $G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -60

#!/bin/bash
# Session 2026-11-22h, run 2 of the session: the prediction forward with a block over a capsule's whole (e, j)
# row (batch_rows: 80 x 4 threads at MNIST, 32 rows a thread; try_batch_rows16: 80 x 8, 16 rows; try_batch_rows64:
# 80 x 2, 64 rows) against batch_walk (16 pairs a block), the hand-written cuda_tuned in the same run. CUDA tests
# of every forward (odd shapes, grid, device tensors, defaults); memcheck and racecheck of the new variants; two
# alternating rounds of the bench; ncu of the kernels at MNIST b128.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[grid],[odd],[device],[default]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
V=batch_rows,try_batch_rows16,try_batch_rows64
for shape in 128:37:8:10:16 256:5:8:8:16 128:3:8:32:16 128:4:8:7:16 384:2:8:33:16 5:3:8:10:16; do
  echo "== memcheck $shape" >> $OUT/sanitizer.log
  timeout 100 compute-sanitizer --tool memcheck $G/halcaps bench --device cuda --op predict --implementations $V \
    --shapes $shape --repeats 1 --warmup 0 --seed 811 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
done
for shape in mnist_b128 128:3:8:32:16; do
  echo "== racecheck $shape" >> $OUT/sanitizer.log
  timeout 150 compute-sanitizer --tool racecheck $G/halcaps bench --device cuda --op predict --implementations $V \
    --shapes $shape --repeats 1 --warmup 0 --seed 812 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
done
grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - -
for round in 1 2; do
  echo "== round $round" >> $OUT/bench.txt
  $G/halcaps bench --device cuda --op predict --shapes mnist_b128,mnist_b512,128:1152:8:32:16 \
    --implementations batch_walk,$V,cuda_tuned --repeats 30 --seed 81$((round + 2)) \
    --json $OUT/predict_$round.json >> $OUT/bench.txt 2>&1
done
grep -E "^== |^predict|copy" $OUT/bench.txt
M=gpu__time_duration.sum,l1tex__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread
ncu --metrics $M $G/halcaps bench --device cuda --op predict --shapes mnist_b128 --implementations batch_walk,$V,cuda_tuned \
  --repeats 1 --warmup 0 --seed 815 > $OUT/ncu.txt 2>&1
grep -E "^  [a-z_].*\(|duration|l1tex__|dram__|warps_active|registers" $OUT/ncu.txt | grep -v wait_kernel | head -80

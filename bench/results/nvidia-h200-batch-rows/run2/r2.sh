#!/bin/bash
# Session 2026-11-22h, run 3 of the session: batch_rows is now run 1's try_batch_rows64 (a block over a capsule's
# whole (e, j) row, 8 * out_caps x 2 threads, 64 rows a thread); beside it try_batch_rows32 (run 1's batch_rows)
# and the 64-row walk unrolled by 2 and 4 (try_batch_rows64u2, u4), against batch_walk and the hand-written
# cuda_tuned. CUDA tests of every forward; memcheck and racecheck of the variants; two alternating bench rounds;
# ncu at MNIST b128.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[grid],[odd],[device],[default]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
V=batch_rows,try_batch_rows32,try_batch_rows64u2,try_batch_rows64u4
for shape in 128:37:8:10:16 256:5:8:8:16 128:3:8:32:16 128:4:8:7:16 384:2:8:33:16 5:3:8:10:16; do
  echo "== memcheck $shape" >> $OUT/sanitizer.log
  timeout 100 compute-sanitizer --tool memcheck $G/halcaps bench --device cuda --op predict --implementations $V \
    --shapes $shape --repeats 1 --warmup 0 --seed 821 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
done
for shape in mnist_b128 128:3:8:32:16; do
  echo "== racecheck $shape" >> $OUT/sanitizer.log
  timeout 150 compute-sanitizer --tool racecheck $G/halcaps bench --device cuda --op predict --implementations $V \
    --shapes $shape --repeats 1 --warmup 0 --seed 822 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
done
grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - -
for round in 1 2; do
  echo "== round $round" >> $OUT/bench.txt
  $G/halcaps bench --device cuda --op predict --shapes mnist_b128,mnist_b512,256:1152:8:10:16,128:1152:8:32:16 \
    --implementations batch_walk,$V,cuda_tuned --repeats 30 --seed 82$((round + 2)) \
    --json $OUT/predict_$round.json >> $OUT/bench.txt 2>&1
done
grep -E "^== |^predict|copy" $OUT/bench.txt
M=gpu__time_duration.sum,l1tex__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread
for shape in mnist_b128 mnist_b512; do
  for impl in batch_walk ${V//,/ }; do
    ncu --metrics $M $G/halcaps bench --device cuda --op predict --shapes $shape --implementations $impl \
      --repeats 1 --warmup 0 --seed 825 > /tmp/ncu_one.txt 2>&1
    { echo "== $shape $impl"; cat /tmp/ncu_one.txt; } >> $OUT/ncu_$shape.txt
    echo "== ncu $shape $impl"; python3 bench/results/nvidia-h200-batch-rows/run1/ncu_summary.py /tmp/ncu_one.txt
  done
done

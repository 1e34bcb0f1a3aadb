#!/bin/bash
# Session 2026-11-22h, run 5: vectors' grad_W (grad_weight_quads) with the two k quads of a (e quad, j, i) on
# adjacent lanes of one warp (threads over (k quad, 32 (e quad, j, i))) instead of in different blocks, so that
# a warp's g loads are 16 distinct rows read twice, not 32. All CUDA tests; memcheck of the prediction's
# gradients at odd shapes; the binary built before this session (.gpu/halcaps_old.xz, 2686138: the same
# backward kernels as c3a124a) and the new one alternating, two rounds, predict_backward and the layer
# backward; ncu of both gradients' kernels at MNIST b128.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_old halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
for shape in 6:5:16:3:16 3:5:8:3:12 17:33:8:10:16 130:7:8:3:16 2:9:16:32:16; do
  echo "== memcheck predict_backward $shape" >> $OUT/sanitizer.log
  timeout 100 compute-sanitizer --tool memcheck $G/halcaps bench --device cuda --op predict_backward \
    --implementations vectors --shapes $shape --repeats 1 --warmup 0 --seed 801 >> $OUT/sanitizer.log 2>&1
  echo "rc $?" >> $OUT/sanitizer.log
done
grep -E "^== |ERROR SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - -
for round in 1 2; do
  for bin in halcaps_old halcaps; do
    echo "== round $round $bin" >> $OUT/bench.txt
    $G/$bin bench --device cuda --op predict_backward --shapes mnist_b128,mnist_b512,wide_b32 --implementations vectors,cuda_fused \
      --repeats 30 --seed 80$((round + 1)) >> $OUT/bench.txt 2>&1
    $G/$bin bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --implementations rows_vectors \
      --repeats 30 --seed 80$((round + 1)) >> $OUT/bench.txt 2>&1
  done
done
grep -E "^== |^predict|^digitcaps|copy" $OUT/bench.txt
for bin in halcaps_old halcaps; do
  ncu --metrics gpu__time_duration.sum,l1tex__throughput.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    $G/$bin bench --device cuda --op predict_backward --shapes mnist_b128 --implementations vectors --repeats 1 --warmup 0 --seed 804 > /tmp/ncu_$bin.txt 2>&1
  grep -E "_kernel_grad|gpu__time_duration|l1tex__throughput|dram__throughput" /tmp/ncu_$bin.txt | grep -v "^==" > $OUT/ncu_gradients_$bin.txt
done
tail -24 $OUT/ncu_gradients_halcaps_old.txt; tail -24 $OUT/ncu_gradients_halcaps.txt

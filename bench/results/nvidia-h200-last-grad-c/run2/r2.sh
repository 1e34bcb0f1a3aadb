#!/bin/bash
# Session 2026-11-22g, run 4 of the session: the layer backward with (1) the last grad_c in the agreements' Tuple
# (s given), (2) that Tuple's threads over capsules fastest, (3) the softmax's max and sum computed in c's threads
# and c . grad_c in grad_logits' (rows schedules, both ops). A/B against the previous commit's binary
# (.gpu/halcaps_old.xz, built at b311efd), two rounds; CUDA tests; memcheck at odd shapes; ncu per kernel.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_old halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[digitcaps],[routing]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
for shape in 1:1:8:1:16 17:33:8:10:16 130:37:8:11:16 3:20:8:10:12 40:45:5:7:7 2:70:16:3:16; do
  echo "== memcheck $shape" >> $OUT/sanitizer.log
  timeout 100 compute-sanitizer --tool memcheck $G/halcaps bench --device cuda --op digitcaps_backward \
    --implementations rows_vectors,rows_predict --shapes $shape --repeats 1 --warmup 0 --seed 731 >> $OUT/sanitizer.log 2>&1
  echo "rc $?" >> $OUT/sanitizer.log
done
grep -E "^== |ERROR SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - -
for round in 1 2; do
  for bin in halcaps_old halcaps; do
    echo "== round $round $bin" >> $OUT/bench.txt
    $G/$bin bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --implementations rows_vectors,rows_predict \
      --repeats 30 --seed 73$((round + 1)) --json $OUT/backward_${bin}_$round.json >> $OUT/bench.txt 2>&1
  done
  echo "== round $round forward" >> $OUT/bench.txt
  $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations fused_split_all_vectors \
    --repeats 30 --seed 73$((round + 1)) --json $OUT/forward_$round.json >> $OUT/bench.txt 2>&1
done
grep -E "^== |^digitcaps|copy" $OUT/bench.txt
ncu --cache-control none --clock-control none --metrics gpu__time_duration.sum $G/halcaps bench --device cuda \
  --op digitcaps_backward --shapes mnist_b128 --implementations rows_vectors --repeats 1 --warmup 0 --seed 734 > $OUT/ncu_backward.txt 2>&1
python3 bench/results/nvidia-h200-forward-sums/run1/kernels.py $OUT/ncu_backward.txt '_kernel_grad_b0_s0' > $OUT/ncu_backward_kernels.txt
head -30 $OUT/ncu_backward_kernels.txt

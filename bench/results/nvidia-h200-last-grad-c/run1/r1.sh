#!/bin/bash
# Session 2026-11-22g, run 3 of the session: digitcaps_backward_with_s with the last iteration's grad_c as an
# element of the agreements' Tuple (one pass over u_hat fewer). CUDA tests of the layer and routing; memcheck
# of the backward's rows at odd shapes, one process a shape; two timing rounds of the forward and backward
# defaults with and without s; ncu per kernel of the backward with s.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[digitcaps],[routing]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
for shape in 1:1:8:1:16 17:33:8:10:16 130:37:8:11:16 3:20:8:10:12 40:45:5:7:7 2:70:16:3:16; do
  echo "== memcheck $shape" >> $OUT/sanitizer.log
  timeout 100 compute-sanitizer --tool memcheck $G/halcaps bench --device cuda --op digitcaps_backward \
    --implementations rows_vectors,rows_predict --shapes $shape --repeats 1 --warmup 0 --seed 721 >> $OUT/sanitizer.log 2>&1
  echo "rc $?" >> $OUT/sanitizer.log
done
grep -E "^== |ERROR SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - -
for round in 1 2; do
  $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations fused_split_all_vectors \
    --repeats 30 --seed 72$((round + 1)) --json $OUT/forward_$round.json >> $OUT/bench.txt 2>&1
  $G/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --implementations rows_vectors \
    --repeats 30 --seed 72$((round + 1)) --json $OUT/backward_$round.json >> $OUT/bench.txt 2>&1
done
grep -E "^digitcaps|copy" $OUT/bench.txt
ncu --cache-control none --clock-control none --metrics gpu__time_duration.sum $G/halcaps bench --device cuda \
  --op digitcaps_backward --shapes mnist_b128 --implementations rows_vectors --repeats 1 --warmup 0 --seed 724 > $OUT/ncu_backward.txt 2>&1
python3 bench/results/nvidia-h200-forward-sums/run1/kernels.py $OUT/ncu_backward.txt '_kernel_grad_b0_s0' > $OUT/ncu_backward_kernels.txt; cat $OUT/ncu_backward_kernels.txt

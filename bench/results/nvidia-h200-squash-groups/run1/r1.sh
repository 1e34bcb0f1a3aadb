#!/bin/bash
# Session 2026-11-22h, run 1: the forward's group sums computed inside the squash kernel's block (fused_split
# variants; the group-sum kernel of each pass goes). CUDA tests of the layer and routing; memcheck and racecheck
# of the forward at odd shapes; the previous commit's binary (.gpu/halcaps_old.xz, built at 2686138) and the new
# one alternating, two rounds, with the new binary's 6- and 2-group variants; ncu per kernel of the new forward.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_old halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests "[digitcaps],[routing]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
for shape in 1:1:8:1:16 17:33:8:10:16 130:37:8:11:16 3:37:8:5:16 9:13:8:24:16; do
  echo "== memcheck $shape" >> $OUT/sanitizer.log
  timeout 100 compute-sanitizer --tool memcheck $G/halcaps bench --device cuda --op digitcaps \
    --implementations fused_split_all_vectors,fused_split_vectors,fused_split,try_groups6,try_groups2 --shapes $shape --repeats 1 --warmup 0 --seed 761 >> $OUT/sanitizer.log 2>&1
  echo "rc $?" >> $OUT/sanitizer.log
done
echo "== racecheck 130:37:8:11:16" >> $OUT/sanitizer.log
timeout 200 compute-sanitizer --tool racecheck $G/halcaps bench --device cuda --op digitcaps --implementations fused_split_all_vectors \
  --shapes 130:37:8:11:16 --repeats 1 --warmup 0 --seed 762 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - -
for round in 1 2; do
  for bin in halcaps_old halcaps; do
    impl=fused_split_all_vectors; [ $bin = halcaps ] && impl=fused_split_all_vectors,try_groups6,try_groups2
    echo "== round $round $bin" >> $OUT/bench.txt
    $G/$bin bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations $impl \
      --repeats 30 --seed 76$((round + 2)) >> $OUT/bench.txt 2>&1
  done
done
grep -E "^== |^digitcaps|copy" $OUT/bench.txt
ncu --cache-control none --clock-control none --metrics gpu__time_duration.sum $G/halcaps bench --device cuda --op digitcaps \
  --shapes mnist_b128 --implementations fused_split_all_vectors --repeats 1 --warmup 0 --seed 765 > $OUT/ncu_forward.txt 2>&1
python3 bench/results/nvidia-h200-forward-sums/run1/kernels.py $OUT/ncu_forward.txt '_kernel_v_s0' > $OUT/ncu_forward_kernels.txt
cat $OUT/ncu_forward_kernels.txt

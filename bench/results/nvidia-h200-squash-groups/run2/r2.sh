#!/bin/bash
# Session 2026-11-22h, run 2: the committed binaries. Forward: the group sums in the squash kernel's block, as
# many groups as fit 1024 threads (6 at MNIST). Backward (rows_vectors, rows_predict): each iteration's softmax
# (c) and grad_logits by a thread per (i, b) row, the sums over j they read in that thread (logit_max, exp_sum
# and c . grad_c have no kernels of their own). All CUDA tests;
# memcheck of both at odd shapes (out_caps 24 included), racecheck of the forward; the previous commit's binary
# (.gpu/halcaps_old.xz, built at 2686138) and the new one alternating, two rounds, forward and backward defaults
# (with and without s); PyTorch peers; ncu per kernel of the new forward and backward with s.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_old halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
for shape in 1:1:8:1:16 17:33:8:10:16 130:37:8:11:16 3:37:8:5:16 9:13:8:24:16 40:45:5:7:7 2:70:16:3:16; do
  for op in digitcaps digitcaps_backward; do
    impl=fused_split_all_vectors,fused_split_vectors,fused_split; [ $op = digitcaps_backward ] && impl=rows_vectors,rows_predict
    echo "== memcheck $op $shape" >> $OUT/sanitizer.log
    timeout 100 compute-sanitizer --tool memcheck $G/halcaps bench --device cuda --op $op \
      --implementations $impl --shapes $shape --repeats 1 --warmup 0 --seed 771 >> $OUT/sanitizer.log 2>&1
    echo "rc $?" >> $OUT/sanitizer.log
  done
done
echo "== racecheck 9:13:8:24:16" >> $OUT/sanitizer.log
timeout 200 compute-sanitizer --tool racecheck $G/halcaps bench --device cuda --op digitcaps --implementations fused_split_all_vectors \
  --shapes 9:13:8:24:16 --repeats 1 --warmup 0 --seed 772 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - -
grep -E "WRONG|does not apply" $OUT/sanitizer.log | sort | uniq -c | head
for round in 1 2; do
  for bin in halcaps_old halcaps; do
    echo "== round $round $bin" >> $OUT/bench.txt
    $G/$bin bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations fused_split_all_vectors \
      --repeats 30 --seed 77$((round + 2)) >> $OUT/bench.txt 2>&1
    $G/$bin bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --implementations rows_vectors \
      --repeats 30 --seed 77$((round + 2)) >> $OUT/bench.txt 2>&1
  done
done
grep -E "^== |^digitcaps|copy" $OUT/bench.txt
python3 bench/pytorch_digitcaps.py --shapes 128 512 --repeats 30 > $OUT/pytorch.txt 2>&1; tail -8 $OUT/pytorch.txt
ncu --cache-control none --clock-control none --metrics gpu__time_duration.sum $G/halcaps bench --device cuda --op digitcaps \
  --shapes mnist_b128 --implementations fused_split_all_vectors --repeats 1 --warmup 0 --seed 775 > /tmp/ncu_forward.txt 2>&1
python3 bench/results/nvidia-h200-forward-sums/run1/kernels.py /tmp/ncu_forward.txt '_kernel_v_s0' > $OUT/ncu_forward_kernels.txt
ncu --cache-control none --clock-control none --metrics gpu__time_duration.sum $G/halcaps bench --device cuda \
  --op digitcaps_backward --shapes mnist_b128 --implementations rows_vectors --repeats 1 --warmup 0 --seed 776 > /tmp/ncu_backward.txt 2>&1
python3 bench/results/nvidia-h200-forward-sums/run1/kernels.py /tmp/ncu_backward.txt '_kernel_grad_b0_s0' > $OUT/ncu_backward_kernels.txt
cat $OUT/ncu_forward_kernels.txt $OUT/ncu_backward_kernels.txt

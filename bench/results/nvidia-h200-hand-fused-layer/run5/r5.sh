#!/bin/bash
# Session 2026-11-22i, run 5: the committed binaries (cuda_fused as in run 4, without the temporary hook). Every
# CUDA test; memcheck, racecheck, initcheck and synccheck of cuda_fused; every implementation of the layer forward
# (JSON and Markdown for the chart), the PyTorch peers right after; ncu: the pass kernel's stall reasons.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
for shape in 1:1:1:1:1 130:37:8:11:16 5:7:16:16:32 33:9:9:3:17 65:300:8:10:16; do
  for tool in memcheck racecheck initcheck synccheck; do
    echo "== $tool $shape" >> $OUT/sanitizer.log
    timeout 100 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op digitcaps \
      --implementations cuda_fused --shapes $shape --repeats 1 --warmup 0 --seed 941 >> $OUT/sanitizer.log 2>&1
    echo "rc $?" >> $OUT/sanitizer.log
  done
done
grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - - | awk '{$2=""; $3=""; print}' | sort | uniq -c
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --repeats 30 --seed 942 \
  --json $OUT/digitcaps.json --markdown $OUT/digitcaps.md > $OUT/bench.txt 2>&1
grep -E "^digitcaps |copy" $OUT/bench.txt
python3 bench/pytorch_digitcaps.py --shapes 128 512 --repeats 30 > $OUT/pytorch.txt 2>&1; grep '"us"' $OUT/pytorch.txt | cut -c1-200
ncu --section WarpStateStats --page raw --kernel-name regex:pass_kernel --launch-skip 1 --launch-count 1 \
  $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 --implementations cuda_fused --repeats 1 --warmup 0 --seed 943 > /tmp/ncu2.txt 2>&1
grep -E "stall|warp_latency|pass_kernel" /tmp/ncu2.txt | grep -v "^==" | awk '/pass_kernel/ || ($NF+0 > 0.05)' > $OUT/ncu_stalls.txt; cat $OUT/ncu_stalls.txt | cut -c1-150

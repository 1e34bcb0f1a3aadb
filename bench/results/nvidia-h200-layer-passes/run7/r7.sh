#!/bin/bash
# Run 7: the committed binaries (run 3's kernels, the v_sum rows copied a warp a row without a division). Every CUDA
# test; memcheck, racecheck, initcheck and synccheck of cuda_tensor at 6 shapes; every implementation of the layer
# forward (JSON and Markdown for the chart), the PyTorch peers right after; ncu durations of cuda_tensor's 6 kernels.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
for shape in 1:1:1:1:1 130:37:8:11:16 37:7:16:16:16 33:9:9:3:9 17:11:3:11:5 65:300:8:10:16; do
  for tool in memcheck racecheck initcheck synccheck; do
    echo "== $tool $shape" >> $OUT/sanitizer.log
    timeout 100 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op digitcaps \
      --implementations cuda_tensor --shapes $shape --repeats 1 --warmup 0 --seed 2071 >> $OUT/sanitizer.log 2>&1
    echo "rc $?" >> $OUT/sanitizer.log
  done
done
grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - - | awk '{$2=""; $3=""; print}' | sort | uniq -c
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --repeats 30 --seed 2072 \
  --json $OUT/digitcaps.json --markdown $OUT/digitcaps.md > $OUT/bench.txt 2>&1
grep -E "^digitcaps |copy" $OUT/bench.txt
python3 bench/pytorch_digitcaps.py --shapes 128 512 --repeats 30 > $OUT/pytorch.txt 2>&1; grep '"us"' $OUT/pytorch.txt | cut -c1-200
ncu --kernel-name regex:"pass_kernel|squash" --launch-count 6 $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 --implementations cuda_tensor --repeats 1 --warmup 0 > $OUT/ncu.txt 2>&1
grep -E "pass_kernel|squash_kernel|Duration|SM Frequency" $OUT/ncu.txt | cut -c1-100 | head -30

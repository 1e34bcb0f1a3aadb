#!/bin/bash
# Session 2026-11-22e, run 4: the committed binaries: every CUDA test; the layer forward (every implementation) and
# backward with the PyTorch peers right after; memcheck and racecheck of both defaults at odd shapes.
G="$(cd "$(dirname "$0")" && pwd)"; for b in halcaps halcaps_cuda_tests; do [ -f $G/$b.xz ] && xz -dc $G/$b.xz > /tmp/$b && chmod +x /tmp/$b; done; B=/tmp
cd "$G/.."
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$B/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log
$B/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --repeats 30 --seed 531 \
  --json $OUT/digitcaps.json --markdown $OUT/digitcaps.md > $OUT/bench.txt 2>&1
$B/halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --implementations rows_predict,rows_vectors \
  --repeats 30 --seed 532 --json $OUT/digitcaps_backward.json >> $OUT/bench.txt 2>&1
python3 bench/pytorch_digitcaps.py --shapes 128 512 --repeats 30 > $OUT/pytorch.txt 2>&1
grep -E "digitcaps" $OUT/bench.txt | grep -v "^#"; cat $OUT/pytorch.txt | tail -6
for tool in memcheck racecheck; do
  echo "== $tool digitcaps_backward rows_vectors" >> $OUT/sanitizer.log
  timeout 200 compute-sanitizer --tool $tool $B/halcaps bench --device cuda --op digitcaps_backward --implementations rows_vectors \
    --shapes 1:1:1:1:1,17:33:8:10:16,130:37:8:11:16,3:20:8:10:12,2:70:16:3:16 --repeats 1 --warmup 0 --seed 533 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
  echo "== $tool digitcaps fused_split_all_vectors" >> $OUT/sanitizer.log
  timeout 200 compute-sanitizer --tool $tool $B/halcaps bench --device cuda --op digitcaps --implementations fused_split_all_vectors,fused \
    --shapes 17:33:8:10:16,130:37:8:11:16,3:37:8:5:16 --repeats 1 --warmup 0 --seed 534 >> $OUT/sanitizer.log 2>&1; echo "rc $?" >> $OUT/sanitizer.log
done
grep -E "^==|ERROR SUMMARY|RACECHECK SUMMARY|^rc " $OUT/sanitizer.log | head -40

#!/bin/bash
# Run 2: cuda_tensor with W split into TF32 pairs once a call (by the first pass, into the scratch) and read split
# by the passes after it (run2/split_w.diff on the commit that adds run 1; dropped). .gpu/halcaps.xz and
# .gpu/halcaps_cuda_tests.xz are built with the diff, .gpu/halcaps_prev.xz without it. Every CUDA test; the four sanitizers on cuda_tensor at nine shapes (four on the split path);
# cuda_tensor before and after, alternating, at MNIST b128 and b512; the PyTorch peers in the same call.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_prev halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
for shape in 1:1:1:1:1 130:37:8:11:16 37:7:16:16:16 33:9:9:3:9 17:11:3:11:5 65:300:8:10:16 20:33:8:4:8 33:70:8:7:16 1:3:8:10:16; do
  for tool in memcheck racecheck initcheck synccheck; do
    timeout 100 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op digitcaps --implementations cuda_tensor \
      --shapes $shape --repeats 1 --warmup 0 --seed 5201 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY" | sed "s/^/$tool $shape: /" >> $OUT/sanitizer.log
  done
done
grep -c " 0 errors\| 0 hazards" $OUT/sanitizer.log; grep -v " 0 errors\| 0 hazards" $OUT/sanitizer.log
for round in 1 2; do
  for b in halcaps_prev halcaps; do
    $G/$b bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_tensor \
      --repeats 30 --seed 520$round > $OUT/bench_${b}_$round.txt 2>&1
    echo "== $b round $round"; grep -E "^digitcaps " $OUT/bench_${b}_$round.txt | awk '{print $2, $3, $6, $NF}'
  done
done
python3 bench/pytorch_digitcaps.py --shapes 128 512 --repeats 30 > $OUT/pytorch.txt 2>&1; tail -6 $OUT/pytorch.txt
(cd $OUT && tar cf bench_rounds.tar bench_halcaps*_*.txt && rm bench_halcaps*_*.txt)

#!/bin/bash
# Run 1: the tensor-core layer (cuda_tensor) with its dense staging copies addressed from each thread's first
# piece (no index arithmetic a piece). .gpu/halcaps.xz and .gpu/halcaps_cuda_tests.xz are the change,
# .gpu/halcaps_prev.xz the commit before it. Every CUDA test; the four sanitizers on cuda_tensor at six shapes;
# cuda_tensor before and after, alternating, at MNIST b128 and b512; the PyTorch peers in the same call.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_prev halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
for shape in 1:1:1:1:1 130:37:8:11:16 37:7:16:16:16 33:9:9:3:9 17:11:3:11:5 65:300:8:10:16; do
  for tool in memcheck racecheck initcheck synccheck; do
    timeout 100 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op digitcaps --implementations cuda_tensor \
      --shapes $shape --repeats 1 --warmup 0 --seed 5101 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY" | sed "s/^/$tool $shape: /" >> $OUT/sanitizer.log
  done
done
grep -c " 0 errors\| 0 hazards" $OUT/sanitizer.log; grep -v " 0 errors\| 0 hazards" $OUT/sanitizer.log
for round in 1 2; do
  for b in halcaps_prev halcaps; do
    $G/$b bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_tensor \
      --repeats 30 --seed 510$round > $OUT/bench_${b}_$round.txt 2>&1
    echo "== $b round $round"; grep -E "^digitcaps " $OUT/bench_${b}_$round.txt | awk '{print $2, $3, $6}'
  done
done
python3 bench/pytorch_digitcaps.py --shapes 128 512 --repeats 30 > $OUT/pytorch.txt 2>&1; tail -6 $OUT/pytorch.txt
(cd $OUT && tar cf bench_rounds.tar bench_halcaps*_*.txt && rm bench_halcaps*_*.txt)

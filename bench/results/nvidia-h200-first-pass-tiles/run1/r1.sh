#!/bin/bash
# Run 1: the tensor-core layer's first pass (cuda_tensor) with two row tiles a warp, so that each W pair is split
# into TF32 parts once for 32 rows. .gpu/halcaps.xz and .gpu/halcaps_cuda_tests.xz are the change,
# .gpu/halcaps_prev.xz the commit before it. Every CUDA test; the four sanitizers on cuda_tensor at five shapes;
# cuda_tensor before and after, alternating, at MNIST b128 and b512; ncu on the first pass of one call; the bench's
# n/a row for an implementation that refuses a shape; the PyTorch peers in the same call.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_prev halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 200 $G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
for shape in 1:1:1:1:1 130:37:8:11:16 33:9:9:3:9 17:11:3:11:5 65:300:8:10:16; do
  for tool in memcheck racecheck initcheck synccheck; do
    timeout 60 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op digitcaps --implementations cuda_tensor \
      --shapes $shape --repeats 1 --warmup 0 --seed 6101 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY" | sed "s/^/$tool $shape: /" >> $OUT/sanitizer.log
  done
done
grep -c " 0 errors\| 0 hazards" $OUT/sanitizer.log; grep -v " 0 errors\| 0 hazards" $OUT/sanitizer.log
for round in 1 2; do
  for b in halcaps_prev halcaps; do
    $G/$b bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_tensor \
      --repeats 30 --seed 610$round > $OUT/bench_${b}_$round.txt 2>&1
    echo "== $b round $round"; grep -E "^digitcaps " $OUT/bench_${b}_$round.txt | awk '{print $2, $3, $6}'
  done
done
(cd $OUT && tar cf bench_rounds.tar bench_halcaps*_*.txt && rm bench_halcaps*_*.txt)
M=gpu__time_duration.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_registers
for b in halcaps_prev halcaps; do
  timeout 90 ncu --kernel-name regex:pass_kernel --launch-count 1 --metrics $M --csv $G/$b bench --device cuda --op digitcaps \
    --implementations cuda_tensor --shapes mnist_b128 --repeats 1 --warmup 0 --seed 6103 > $OUT/ncu_$b.csv 2> $OUT/ncu_$b.err
  echo "== ncu first pass $b"; grep -E '"(gpu__time|smsp__inst|sm__warps|smsp__issue|launch__reg|launch__occ)' $OUT/ncu_$b.csv | awk -F'","' '{print $(NF-2), $NF}' | sed 's/"//g'
done
# The bench's n/a row: `fused` gradients refuse out_caps x out_dim 1024 (their g tile is past 48 KB).
$G/halcaps bench --device cuda --op predict_backward --shapes 16:64:8:64:16 --implementations fused,vectors \
  --repeats 5 --seed 6104 --markdown $OUT/na_row.md --json $OUT/na_row.json > $OUT/na_row.txt 2>&1; echo "rc $?" >> $OUT/na_row.txt
cat $OUT/na_row.txt
timeout 150 python3 bench/pytorch_digitcaps.py --shapes 128 512 --repeats 30 > $OUT/pytorch.txt 2>&1; tail -6 $OUT/pytorch.txt

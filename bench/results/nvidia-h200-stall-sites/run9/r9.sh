#!/bin/bash
# Run 9: cuda_tensor with v_sum's rows stored so that a lane's four columns of a row are one 16-byte load (v_column),
# at a row stride of 176 floats (.gpu/halcaps.xz, .gpu/halcaps_cuda_tests.xz); .gpu/halcaps_prev.xz is 1e1341f. The CUDA DigitCaps tests;
# memcheck, racecheck and initcheck at five shapes; both binaries alternating at MNIST b128 and b512 (two rounds);
# ncu per kernel at the GPU's clocks with warm caches, both binaries.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_prev halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 200 $G/halcaps_cuda_tests "[digitcaps]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
for shape in 1:1:1:1:1 130:37:8:11:16 17:11:3:11:5 65:300:8:10:16 33:9:9:3:9; do
  for tool in memcheck racecheck initcheck; do
    timeout 60 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op digitcaps --implementations cuda_tensor \
      --shapes $shape --repeats 1 --warmup 0 --seed 8901 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|wrong" | sed "s/^/$tool $shape: /" >> $OUT/sanitizer.log
  done
done
grep -c " 0 errors\| 0 hazards" $OUT/sanitizer.log; grep -v " 0 errors\| 0 hazards" $OUT/sanitizer.log
for round in 1 2; do
  for b in halcaps_prev halcaps; do
    $G/$b bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_tensor \
      --repeats 30 --seed 890$round > $OUT/bench_${b}_$round.txt 2>&1
    echo "== $b round $round"; grep -E "^digitcaps |wrong|rror" $OUT/bench_${b}_$round.txt | awk '{print $2, $3, $5, $6}'
  done
done
(cd $OUT && tar cf bench_rounds.tar bench_halcaps*_*.txt && rm bench_halcaps*_*.txt)
for b in halcaps_prev halcaps; do
  timeout 90 ncu --clock-control none --cache-control none --kernel-name regex:"pass_kernel|squash" --launch-count 6 \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,smsp__issue_active.avg.pct_of_peak_sustained_active \
    --csv $G/$b bench --device cuda --op digitcaps --implementations cuda_tensor --shapes mnist_b128 --repeats 1 --warmup 0 \
    --seed 8903 > $OUT/ncu_$b.csv 2> $OUT/ncu_$b.err
  echo "== ncu per kernel, $b"; grep -E '"(gpu__time|smsp__inst|launch__reg|smsp__issue)' $OUT/ncu_$b.csv | awk -F'","' '{split($5,k,"<"); print $1, substr(k[1],1,36), $(NF-2), $NF}' | sed 's/"//g' | head -24
done
(cd $OUT && tar cf ncu.tar ncu_*.csv ncu_*.err && rm ncu_*.csv ncu_*.err)

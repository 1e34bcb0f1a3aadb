#!/bin/bash
# Run 3: cuda_tensor's first iteration without b0 as a float32 matrix product on the CUDA cores
# (digitcaps_first_pass_fp32.cuh). .gpu/halcaps.xz and .gpu/halcaps_cuda_tests.xz are the change,
# .gpu/halcaps_prev.xz its parent (run 1's change). The CUDA DigitCaps tests (the rest of the suite is
# unchanged since run 2); the four sanitizers on cuda_tensor at five shapes (the bench checks each against the
# reference first); before and after, alternating, at MNIST b128 and b512; ncu on the first pass of each.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_prev halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 300 $G/halcaps_cuda_tests "[digitcaps]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
for shape in 1:1:1:1:1 130:37:8:11:16 33:9:9:3:9 65:19:3:7:9 65:300:8:10:16; do
  for tool in memcheck racecheck initcheck synccheck; do
    timeout 60 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op digitcaps --implementations cuda_tensor \
      --shapes $shape --repeats 1 --warmup 0 --seed 6301 > $OUT/san.txt 2>&1
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $OUT/san.txt | sed "s/^/$tool $shape: /" >> $OUT/sanitizer.log
    grep -E "^digitcaps " $OUT/san.txt | awk -v t=$tool -v s=$shape '{print t, s, "check", $5}' >> $OUT/sanitizer.log
  done
done
rm -f $OUT/san.txt
echo "sanitizer: $(grep -c ' 0 errors\| 0 hazards' $OUT/sanitizer.log) clean of 20, $(grep -c 'check ok' $OUT/sanitizer.log) checks ok of 20"
grep -v " 0 errors\| 0 hazards\|check ok" $OUT/sanitizer.log
for round in 1 2; do
  for b in halcaps_prev halcaps; do
    $G/$b bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_tensor \
      --repeats 30 --seed 630$round > $OUT/bench_${b}_$round.txt 2>&1
    echo "== $b round $round"; grep -E "^digitcaps " $OUT/bench_${b}_$round.txt | awk '{print $2, $3, $5, $6}'
  done
done
M=gpu__time_duration.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size
for b in halcaps_prev halcaps; do
  for shape in mnist_b128 mnist_b512; do
    timeout 90 ncu --kernel-name regex:"pass_kernel|first_pass" --launch-count 1 --metrics $M --csv $G/$b bench --device cuda \
      --op digitcaps --implementations cuda_tensor --shapes $shape --repeats 1 --warmup 0 --seed 6303 > $OUT/ncu_${b}_$shape.csv 2>&1
    echo "== ncu first pass $b $shape"; grep -E '"(gpu__time|smsp__inst|sm__warps|smsp__issue|launch__reg|launch__grid)' $OUT/ncu_${b}_$shape.csv | awk -F'","' '{print $(NF-2), $NF}' | sed 's/"//g'
  done
done
(cd $OUT && tar cf outputs.tar bench_halcaps*_*.txt ncu_*.csv && rm bench_halcaps*_*.txt ncu_*.csv)

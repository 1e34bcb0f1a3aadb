#!/bin/bash
# Run 2: cuda_tensor's first pass with its warps split over the columns (out_caps x out_dim) as well as the input
# capsules: HALCAPS_FIRST_CG = 1 (as before: 4 i-lanes, every warp all 160 columns), 2 (2 column groups x 2 i-lanes)
# or 4 (4 column groups, no i-lanes: the sum over the block's i-lanes in shared memory is gone). The switch is the
# experiment's, not committed. .gpu/halcaps.xz and .gpu/halcaps_cuda_tests.xz are the change, .gpu/halcaps_prev.xz
# is 40fd20c. The CUDA DigitCaps tests at each CG; memcheck and racecheck at two shapes for CG 2 and 4; the four,
# alternating, at MNIST b128 and b512 (two rounds); ncu per kernel at the GPU's clocks with warm caches, each CG.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_prev halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
for cg in 1 2 4; do
  HALCAPS_FIRST_CG=$cg timeout 150 $G/halcaps_cuda_tests "[digitcaps]" > $OUT/cuda_tests_cg$cg.log 2>&1; echo "rc $?" >> $OUT/cuda_tests_cg$cg.log
  echo "== tests CG $cg"; tail -3 $OUT/cuda_tests_cg$cg.log; grep -B3 -A12 FAILED $OUT/cuda_tests_cg$cg.log | head -30
done
for cg in 2 4; do for shape in 130:37:8:11:16 65:300:8:10:16 33:9:4:10:16; do for tool in memcheck racecheck; do
  HALCAPS_FIRST_CG=$cg timeout 60 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op digitcaps --implementations cuda_tensor \
    --shapes $shape --repeats 1 --warmup 0 --seed 7201 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^digitcaps " | sed "s/^/CG $cg $tool $shape: /" >> $OUT/sanitizer.log
done; done; done
grep -c " 0 errors\| 0 hazards" $OUT/sanitizer.log; grep -v " 0 errors\| 0 hazards" $OUT/sanitizer.log
for round in 1 2; do
  for b in prev cg1 cg2 cg4; do
    if [ $b = prev ]; then bin=halcaps_prev; cg=1; else bin=halcaps; cg=${b#cg}; fi
    HALCAPS_FIRST_CG=$cg $G/$bin bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_tensor \
      --repeats 30 --seed 720$round > $OUT/bench_${b}_$round.txt 2>&1
    echo "== $b round $round"; grep -E "^digitcaps |wrong|rror" $OUT/bench_${b}_$round.txt | awk '{print $2, $3, $5, $6}'
  done
done
(cd $OUT && tar cf bench_rounds.tar bench_*_*.txt && rm bench_*_*.txt)
for cg in 1 2 4; do
  HALCAPS_FIRST_CG=$cg timeout 90 ncu --clock-control none --cache-control none --kernel-name regex:"pass_kernel|squash" --launch-count 6 \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,smsp__issue_active.avg.pct_of_peak_sustained_active \
    --csv $G/halcaps bench --device cuda --op digitcaps --implementations cuda_tensor --shapes mnist_b128 --repeats 1 --warmup 0 \
    --seed 7203 > $OUT/ncu_cg$cg.csv 2> $OUT/ncu_cg$cg.err
  echo "== ncu per kernel, CG $cg"; grep -E '"(gpu__time|smsp__inst|launch__reg|smsp__issue)' $OUT/ncu_cg$cg.csv | awk -F'","' '{split($5,k,"<"); print $1, substr(k[1],1,36), $(NF-2), $NF}' | sed 's/"//g' | head -12
done
(cd $OUT && tar cf ncu.tar ncu_*.csv ncu_*.err && rm ncu_*.csv ncu_*.err)

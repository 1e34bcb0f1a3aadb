#!/bin/bash
# Run 2: cuda_tensor splitting W into TF32 pairs with big = W truncated (its low 13 bits cleared; ptxas then
# passes W itself as the big operand, the mma reading its top bits) in place of rounded: 40 instructions fewer a
# warp and input capsule in the passes with the logits (.gpu/halcaps.xz, .gpu/halcaps_cuda_tests.xz);
# .gpu/halcaps_prev.xz is c2b4824. The CUDA DigitCaps tests; memcheck, racecheck and synccheck at six shapes;
# both binaries alternating at MNIST b128 and b512 (two rounds); ncu per kernel at the GPU's clocks, both.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_prev halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 200 $G/halcaps_cuda_tests "[digitcaps]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
for shape in 1:1:1:1:1 130:37:8:11:16 65:300:8:10:16 40:37:8:10:16 33:9:9:3:9 512:200:8:10:16; do
  for tool in memcheck racecheck synccheck; do
    timeout 60 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op digitcaps --implementations cuda_tensor \
      --shapes $shape --repeats 1 --warmup 0 --seed 9001 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|wrong|WRONG" | sed "s/^/$tool $shape: /" >> $OUT/sanitizer.log
  done
done
grep -c " 0 errors\| 0 hazards" $OUT/sanitizer.log; grep -v " 0 errors\| 0 hazards" $OUT/sanitizer.log
for round in 1 2; do
  for b in halcaps_prev halcaps; do
    $G/$b bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_tensor \
      --repeats 30 --seed 900$round > $OUT/bench_${b}_$round.txt 2>&1
    echo "== $b round $round"; grep -E "^digitcaps |wrong|rror" $OUT/bench_${b}_$round.txt | awk '{print $2, $3, $5, $6}'
  done
done
(cd $OUT && tar cf bench_rounds.tar bench_halcaps*_*.txt && rm bench_halcaps*_*.txt)
for b in halcaps_prev halcaps; do
  for shape in mnist_b128 mnist_b512; do
    timeout 90 ncu --clock-control none --cache-control none --kernel-name regex:"pass_kernel|squash" --launch-count 6 \
      --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread \
      --csv $G/$b bench --device cuda --op digitcaps --implementations cuda_tensor --shapes $shape --repeats 1 --warmup 0 \
      --seed 9003 > $OUT/ncu_${b}_$shape.csv 2> $OUT/ncu_${b}_$shape.err
    echo "== ncu $shape, $b"; grep -E '"(gpu__time|smsp__inst)' $OUT/ncu_${b}_$shape.csv | awk -F'","' '{split($5,k,"<"); print $1, substr(k[1],1,36), $(NF-2), $NF}' | sed 's/"//g' | head -12
  done
done
(cd $OUT && tar cf ncu.tar ncu_*.csv ncu_*.err && rm ncu_*.csv ncu_*.err)

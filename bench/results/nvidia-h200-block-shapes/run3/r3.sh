#!/bin/bash
# Run 3: the passes with the logits adding each row's dots over its 4 lanes by two rounds of shuffles (every lane
# then holds both rows' dots) and every lane taking both rows' softmax itself, with the softmax's 1 / total as
# __fdividef (MUFU.RCP, no slow path) (.gpu/halcaps.xz, .gpu/halcaps_cuda_tests.xz); .gpu/halcaps_rcp.xz is 243b907
# with only the __fdividef; .gpu/halcaps_prev.xz is 243b907. The CUDA DigitCaps tests; memcheck, racecheck and
# synccheck at six shapes; the three binaries alternating at MNIST b128 and b512 (two rounds); ncu per kernel at
# the GPU's clocks at b128 and b512.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_prev halcaps_rcp halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
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
  for b in halcaps_prev halcaps_rcp halcaps; do
    $G/$b bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_tensor \
      --repeats 30 --seed 900$round > $OUT/bench_${b}_$round.txt 2>&1
    echo "== $b round $round"; grep -E "^digitcaps |wrong|rror" $OUT/bench_${b}_$round.txt | awk '{print $2, $3, $5, $6}'
  done
done
(cd $OUT && tar cf bench_rounds.tar bench_halcaps*_*.txt && rm bench_halcaps*_*.txt)
for b in halcaps_prev halcaps; do
  for shape in mnist_b128 mnist_b512; do
    timeout 90 ncu --clock-control none --cache-control none --kernel-name regex:"pass_kernel" --launch-count 3 \
      --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread \
      --csv $G/$b bench --device cuda --op digitcaps --implementations cuda_tensor --shapes $shape --repeats 1 --warmup 0 \
      --seed 9003 > $OUT/ncu_${b}_$shape.csv 2> $OUT/ncu_${b}_$shape.err
    echo "== ncu $shape, $b"; grep -E '"(gpu__time|smsp__inst)' $OUT/ncu_${b}_$shape.csv | awk -F'","' '{split($5,k,"<"); print $1, substr(k[1],1,36), $(NF-2), $NF}' | sed 's/"//g' | head -12
  done
done
(cd $OUT && tar cf ncu.tar ncu_*.csv ncu_*.err && rm ncu_*.csv ncu_*.err)

#!/bin/bash
# Run 5: run 3 plus the first-iteration kernel at 3 blocks an SM (with its own chunk count) and the squash kernel
# with eight loads in flight a thread. Layer tests, sanitizers at odd shapes, the layer timed, ncu durations.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 300 $G/halcaps_cuda_tests "[digitcaps]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B5 -A15 FAILED $OUT/cuda_tests.log | head -60
for shape in 1:1:1:1:1 130:37:8:11:16 37:7:16:16:16 33:9:9:3:9 17:11:3:11:5 65:300:8:10:16; do
  for tool in memcheck racecheck synccheck; do
    echo "== $tool $shape" >> $OUT/sanitizer.log
    timeout 100 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op digitcaps \
      --implementations cuda_tensor,cuda_fused --shapes $shape --repeats 1 --warmup 0 --seed 2051 >> $OUT/sanitizer.log 2>&1
    echo "rc $?" >> $OUT/sanitizer.log
  done
done
grep -E "^== |ERROR SUMMARY|RACECHECK SUMMARY|^rc " $OUT/sanitizer.log | paste -d" " - - - | awk '{$2=""; $3=""; print}' | sort | uniq -c
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_tensor,cuda_fused,fused_split_all_vectors \
  --repeats 30 --seed 2052 > $OUT/bench.txt 2>&1
grep -E "^digitcaps |copy" $OUT/bench.txt
ncu --kernel-name regex:"pass_kernel|squash" --launch-count 6 $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 --implementations cuda_tensor --repeats 1 --warmup 0 > $OUT/ncu.txt 2>&1
grep -E "pass_kernel|squash_kernel|Duration|Registers Per|Achieved Occupancy" $OUT/ncu.txt | cut -c1-100 | head -30

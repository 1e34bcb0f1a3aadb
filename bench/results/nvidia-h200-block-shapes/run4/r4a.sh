#!/bin/bash
# Run 4, call 1: with 5e7a3e1's binaries (.gpu/halcaps.xz, .gpu/halcaps_cuda_tests.xz): memcheck, racecheck and
# synccheck for cuda_tensor at six shapes; issue 4's ratios from one call: cuda_tensor at MNIST b128 and b512, then
# the PyTorch peers (bench/pytorch_digitcaps.py, eager and torch.compile).
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
for shape in 1:1:1:1:1 130:37:8:11:16 65:300:8:10:16 40:37:8:10:16 33:9:9:3:9 512:200:8:10:16; do
  for tool in memcheck racecheck synccheck; do
    timeout 60 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op digitcaps --implementations cuda_tensor \
      --shapes $shape --repeats 1 --warmup 0 --seed 9001 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|wrong|WRONG" | sed "s/^/$tool $shape: /" >> $OUT/sanitizer.log
  done
done
grep -c " 0 errors\| 0 hazards" $OUT/sanitizer.log; grep -v " 0 errors\| 0 hazards" $OUT/sanitizer.log
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_tensor \
  --repeats 30 --seed 9011 > $OUT/bench.txt 2>&1; grep -E "^digitcaps " $OUT/bench.txt | awk '{print $2, $3, $5, $6}'
timeout 150 python3 bench/pytorch_digitcaps.py --shapes 128 512 --repeats 30 > $OUT/pytorch.txt 2>&1
grep -o '"B": [0-9]*\|"implementation": "[a-z_]*", "us": [0-9.]*' $OUT/pytorch.txt | paste - -

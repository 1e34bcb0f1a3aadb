#!/bin/bash
# The review's check: softmax_base2 serves the shared-out softmax too (a lane-pair option), in place of its copy in
# the passes with the logits; same PTX instruction mix and registers. The CUDA DigitCaps tests, memcheck and
# racecheck at two shapes, and cuda_tensor at MNIST.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
timeout 300 $G/halcaps_cuda_tests "[digitcaps]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log; tail -3 $OUT/cuda_tests.log
for shape in 17:11:3:11:5 65:300:8:10:16; do
  for tool in memcheck racecheck; do
    timeout 60 compute-sanitizer --tool $tool $G/halcaps bench --device cuda --op digitcaps --implementations cuda_tensor \
      --shapes $shape --repeats 1 --warmup 0 --seed 7401 2>&1 | grep -E "SUMMARY" | sed "s/^/$tool $shape: /"
  done
done | tee $OUT/sanitizer.log
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_tensor --repeats 30 \
  --seed 7402 > $OUT/bench.txt 2>&1; echo "rc $?" >> $OUT/bench.txt; grep -E "^digitcaps |rc" $OUT/bench.txt

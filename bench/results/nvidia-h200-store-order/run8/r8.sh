#!/bin/bash
# Run 8: after the review's mends (cuda_staged on the file's cp.async intrinsics, the device limits cached in one
# header for every hand-written plan): every CUDA test; the fast forward and layer implementations once more.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
$G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A20 FAILED $OUT/cuda_tests.log | head -40
$G/halcaps bench --device cuda --op predict --shapes mnist_b128,mnist_b512 \
  --implementations cuda_staged,cuda_tuned,batch_rows --repeats 30 --seed 2251 > $OUT/predict.txt 2>&1
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 \
  --implementations cuda_tensor,cuda_fused --repeats 30 --seed 2252 > $OUT/digitcaps.txt 2>&1
grep -hE "^predict |^digitcaps |copy" $OUT/predict.txt $OUT/digitcaps.txt

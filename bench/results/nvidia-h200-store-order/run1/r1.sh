#!/usr/bin/env bash
# Run 1: store orders for u_hat, then the forward's implementations in the same call.
set -u
G=/tmp/bin; mkdir -p $G
for b in halcaps; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $OUT/gpu.txt
.gpu/predict_store_order 128 512 2>&1 | tee $OUT/store_order.txt
$G/halcaps bench --device cuda --op predict --shapes mnist_b128,mnist_b512 \
  --implementations batch_rows,cuda_tuned --repeats 30 --seed 2201 2>&1 | tee $OUT/predict.txt

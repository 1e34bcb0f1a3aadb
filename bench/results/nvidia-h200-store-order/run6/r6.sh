#!/usr/bin/env bash
# Run 6: plain and evict-first stores in address order (flat_*), then run 4's rows for the u_hat kernel (bench/predict_store_order.cu).
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
.gpu/predict_store_order 128 512 2>&1 | tee $OUT/store_order.txt

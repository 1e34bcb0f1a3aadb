#!/usr/bin/env bash
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
./halcaps_cuda_tests "[grid],[odd],[device],[stream],[digitcaps]" > $OUT/cuda_tests.log 2>&1; echo "tests rc=$?" >> $OUT/cuda_tests.log
./halcaps bench --device cuda --op predict --repeats 30 --seed 139 --implementations tuned,tuned_k8,batch_vec4,batch_vec4_k8,cuda_tuned,cuda_blog_naive,cublas --json $OUT/predict.json --markdown $OUT/predict.md > $OUT/predict.txt 2>&1
./halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --implementations tiled_predict,tiled_predict_bv --repeats 30 --seed 139 > $OUT/backward.txt 2>&1
ncu -k regex:u_hat -c 1 --section SpeedOfLight --section Occupancy --section WarpStateStats ./halcaps bench --device cuda --op predict --shapes mnist_b128 --implementations batch_vec4_k8 --repeats 1 --warmup 0 --seed 7 > $OUT/ncu_batch_vec4_k8.txt 2>&1
timeout 200 compute-sanitizer --tool memcheck ./halcaps_cuda_tests "[odd]" > $OUT/memcheck_odd.log 2>&1; echo "memcheck rc=$?" >> $OUT/memcheck_odd.log

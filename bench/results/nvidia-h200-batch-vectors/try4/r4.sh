#!/usr/bin/env bash
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
./halcaps_cuda_tests "[grid],[odd],[device],[stream],[default]" > $OUT/cuda_tests.log 2>&1; echo "tests rc=$?" >> $OUT/cuda_tests.log
./halcaps bench --device cuda --op predict --repeats 30 --seed 149 --implementations tuned,tuned_k8,batch_vec4_k8,batch_vec4_ej64,batch_vec4_ej160,cuda_tuned,cuda_blog_naive,cublas --json $OUT/predict.json --markdown $OUT/predict.md > $OUT/predict.txt 2>&1
for impl in batch_vec4_ej64 batch_vec4_ej160; do
ncu -k regex:u_hat -c 1 --section SpeedOfLight --section Occupancy --section WarpStateStats ./halcaps bench --device cuda --op predict --shapes mnist_b128 --implementations $impl --repeats 1 --warmup 0 --seed 7 > $OUT/ncu_$impl.txt 2>&1
done
timeout 200 compute-sanitizer --tool memcheck ./halcaps_cuda_tests "[odd]" > $OUT/memcheck_odd.log 2>&1; echo "memcheck rc=$?" >> $OUT/memcheck_odd.log

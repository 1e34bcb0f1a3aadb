#!/usr/bin/env bash
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
./halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "tests rc=$?" >> $OUT/cuda_tests.log
./halcaps bench --device cuda --op predict --repeats 30 --seed 131 --json $OUT/predict.json --markdown $OUT/predict.md > $OUT/predict.txt 2>&1
ncu --section SpeedOfLight --section Occupancy --section LaunchStats ./halcaps bench --device cuda --op predict --shapes mnist_b128 --implementations tuned,batch_vec4,batch_vec4_b16 --repeats 1 --warmup 1 --seed 7 > $OUT/ncu_predict.txt 2>&1
timeout 240 compute-sanitizer --tool memcheck ./halcaps_cuda_tests "[odd]" > $OUT/memcheck_odd.log 2>&1; echo "memcheck rc=$?" >> $OUT/memcheck_odd.log

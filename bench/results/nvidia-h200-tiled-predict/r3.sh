#!/usr/bin/env bash
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
./halcaps_cuda_tests "[digitcaps]" > $OUT/cuda_tests_digitcaps.log 2>&1; echo "tests rc=$?" >> $OUT/cuda_tests_digitcaps.log
./halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations fused_split --repeats 30 --seed 93 > $OUT/backward_predict.txt 2>&1
./halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128,mnist_b512 --repeats 30 --seed 93 --json $OUT/backward_predict.json --markdown $OUT/backward_predict.md >> $OUT/backward_predict.txt 2>&1
ncu --metrics gpu__time_duration.sum ./halcaps bench --device cuda --op digitcaps_backward --shapes mnist_b128 --implementations tiled_predict --repeats 1 --warmup 1 --seed 63 > $OUT/ncu_backward_tiled_predict.txt 2>&1
timeout 280 compute-sanitizer --tool memcheck ./halcaps_cuda_tests "cuda digitcaps: odd sizes*" > $OUT/memcheck_odd.log 2>&1; echo "memcheck rc=$?" >> $OUT/memcheck_odd.log

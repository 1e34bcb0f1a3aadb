#!/usr/bin/env bash
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
./halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "tests rc=$?" >> $OUT/cuda_tests.log
./halcaps bench --device cuda --op predict --repeats 30 --seed 151 --json $OUT/predict.json --markdown $OUT/predict.md > $OUT/predict.txt 2>&1
timeout 240 compute-sanitizer --tool memcheck ./halcaps_cuda_tests "[odd],[default]" > $OUT/memcheck.log 2>&1; echo "memcheck rc=$?" >> $OUT/memcheck.log
timeout 120 compute-sanitizer --tool racecheck ./halcaps_cuda_tests "[default]" > $OUT/racecheck.log 2>&1; echo "racecheck rc=$?" >> $OUT/racecheck.log

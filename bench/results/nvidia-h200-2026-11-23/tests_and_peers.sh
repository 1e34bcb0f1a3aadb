#!/bin/bash
# Every CUDA test and the PyTorch DigitCaps peers, with the binaries of the commit that adds this script
# (.gpu/halcaps_cuda_tests.xz). Outputs: cuda_tests.log, pytorch.txt.
G=/tmp/bin; mkdir -p $G; xz -dc .gpu/halcaps_cuda_tests.xz > $G/halcaps_cuda_tests && chmod +x $G/halcaps_cuda_tests
timeout 400 $G/halcaps_cuda_tests > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B3 -A12 FAILED $OUT/cuda_tests.log | head -40
timeout 150 python3 bench/pytorch_digitcaps.py --shapes 128 512 --repeats 30 > $OUT/pytorch.txt 2>&1; tail -4 $OUT/pytorch.txt

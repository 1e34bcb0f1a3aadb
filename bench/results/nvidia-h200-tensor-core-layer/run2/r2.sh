#!/bin/bash
# Run 2: run 1's binaries; ncu's full set on cuda_tensor's first pass kernel with the agreement (MNIST b128).
G=/tmp/bin; mkdir -p $G; for b in halcaps; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
ncu --set full --kernel-name regex:pass_kernel --launch-skip 1 --launch-count 1 --page details --print-details all \
  $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 --implementations cuda_tensor --repeats 1 --warmup 0 > $OUT/ncu_full.txt 2>&1
ncu --set full --kernel-name regex:pass_kernel --launch-skip 1 --launch-count 1 --page raw \
  $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 --implementations cuda_tensor --repeats 1 --warmup 0 > $OUT/ncu_raw.txt 2>&1
grep -iE "stall|pipe_tensor|inst_executed |issue_active|Duration|smsp__cycles_active.avg " $OUT/ncu_raw.txt | grep -v "^ *$" | head -80

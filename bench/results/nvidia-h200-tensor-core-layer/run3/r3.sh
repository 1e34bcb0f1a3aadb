#!/bin/bash
# Run 3: cuda_tensor with branch-free loops over j (W staged with zeros past out_caps), in_dim steps and out_dim
# tiles as template parameters, copies without runtime divisions on the dense path. halcaps: at least 2 blocks
# an SM (223 registers at MNIST); halcaps_b3: 3 (168 registers, 8 bytes spilled). The layer tests first.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_b3 halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
timeout 300 $G/halcaps_cuda_tests "[digitcaps]" > $OUT/cuda_tests.log 2>&1; echo "rc $?" >> $OUT/cuda_tests.log
tail -3 $OUT/cuda_tests.log; grep -B5 -A15 FAILED $OUT/cuda_tests.log | head -60
for bin in halcaps halcaps_b3; do for blk in 22 12 14; do
  echo "$bin block $blk"; HALCAPS_TENSOR_BLOCK=$blk $G/$bin bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_tensor \
  --repeats 30 --seed 1003 2>&1 | grep -E "^digitcaps " | tee -a $OUT/blocks.txt
done; done
$G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_tensor,cuda_fused,fused_split_all_vectors \
  --repeats 30 --seed 1004 > $OUT/bench.txt 2>&1
grep -E "^digitcaps |copy" $OUT/bench.txt
ncu --kernel-name regex:"pass_kernel|squash" --launch-count 4 $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 --implementations cuda_tensor --repeats 1 --warmup 0 > $OUT/ncu.txt 2>&1
grep -E "pass_kernel|squash_kernel|Duration|Registers Per|Achieved Occupancy|Compute \(SM\) Throughput" $OUT/ncu.txt | cut -c1-100 | head -30
ncu --section WarpStateStats --section InstructionStats --page raw --kernel-name regex:pass_kernel --launch-skip 1 --launch-count 1 $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 --implementations cuda_tensor --repeats 1 --warmup 0 > $OUT/ncu_stalls.txt 2>&1
grep -E "inst_executed.sum |issue_stalled.*ratio" $OUT/ncu_stalls.txt | awk '{print $1, $NF}' | sort -k2 -g -r | head -12

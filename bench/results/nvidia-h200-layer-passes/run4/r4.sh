#!/bin/bash
# Run 4: run 3's build under ncu at MNIST b128: the stall reasons and instruction counts of the first-iteration pass,
# the pass with the logits and the squash kernel; per-instruction counts (SourceCounters) of the pass with the logits.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_cuda_tests; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
ncu --section WarpStateStats --section InstructionStats --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis --page raw \
  --kernel-name regex:"pass_kernel|squash" --launch-count 3 $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 \
  --implementations cuda_tensor --repeats 1 --warmup 0 > $OUT/ncu_stalls.txt 2>&1
grep -E "^  void|gpu__time_duration.sum|inst_executed.sum |issue_active.avg.per|warps_active.avg.pct|issue_stalled.*ratio|lts__t_bytes.sum.per_second |dram__bytes.sum.per_second" $OUT/ncu_stalls.txt \
  | awk '{ if ($1=="void") print substr($0,1,90); else if ($NF+0 >= 0.1 || $1 ~ /duration|inst_exec|bytes/) print $1, $(NF-1), $NF }'
ncu --kernel-name regex:pass_kernel --launch-skip 1 --launch-count 1 --section SourceCounters -o $OUT/logits $G/halcaps bench --device cuda --op digitcaps --shapes mnist_b128 --implementations cuda_tensor --repeats 1 --warmup 0 > $OUT/log.txt 2>&1
ncu -i $OUT/logits.ncu-rep --page source --print-source sass --csv > $OUT/sass.csv 2>&1; rm -f $OUT/logits.ncu-rep

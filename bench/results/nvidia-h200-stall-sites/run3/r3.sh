#!/bin/bash
# Run 3: as run 1, on 9445ef0 (the whole block adding and writing each pass's sums, less zeroing): where the passes' warps
# stall now, instruction by instruction (ncu's warp-state samples, GPU's clocks, warm caches), MNIST b128.
G=/tmp/bin; mkdir -p $G; for b in halcaps; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 240 ncu --clock-control none --cache-control none --kernel-name regex:"pass_kernel" --launch-count 2 \
  --section SourceCounters --section WarpStateStats --section SchedulerStats --section Occupancy \
  --section ComputeWorkloadAnalysis --section LaunchStats --section SpeedOfLight --section MemoryWorkloadAnalysis \
  -o $OUT/passes $G/halcaps bench --device cuda --op digitcaps --implementations cuda_tensor --shapes mnist_b128 \
  --repeats 1 --warmup 1 --seed 8131 > $OUT/ncu.log 2>&1
tail -5 $OUT/ncu.log
ncu -i $OUT/passes.ncu-rep --page details > $OUT/details.txt 2>&1
for id in 0 1; do
  ncu -i $OUT/passes.ncu-rep --page source --csv --print-source sass --launch-skip $id --launch-count 1 > $OUT/sass_$id.csv 2> $OUT/sass_$id.err
  head -c 600 $OUT/sass_$id.csv; echo; wc -l $OUT/sass_$id.csv; head -3 $OUT/sass_$id.err
done
grep -E "pass_kernel|Duration|Warp Cycles Per Issued|Issue Slots Busy|Achieved Occupancy|Registers Per" $OUT/details.txt | cut -c1-150
(cd $OUT && xz -T4 passes.ncu-rep && tar cf sass.tar sass_*.csv sass_*.err && xz -T4 sass.tar && rm sass_*.csv)

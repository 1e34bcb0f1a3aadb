#!/bin/bash
# Run 0: the first resident build (.gpu/halcaps.xz) at MNIST b128 under ncu: the kernel's time, warp states and
# samples by SASS instruction (it measured 145.8 us in `halcaps bench`, against 60.2 for c8e7dbf).
G=/tmp/bin; mkdir -p $G; xz -dc .gpu/halcaps.xz > $G/halcaps && chmod +x $G/halcaps
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 200 ncu --clock-control none --kernel-name regex:"resident" --launch-count 1 \
  --section SourceCounters --section WarpStateStats --section SchedulerStats --section Occupancy \
  --section LaunchStats --section SpeedOfLight --section MemoryWorkloadAnalysis \
  -o $OUT/resident $G/halcaps bench --device cuda --op digitcaps --implementations cuda_tensor --shapes mnist_b128 \
  --repeats 1 --warmup 1 --seed 8101 > $OUT/ncu.log 2>&1
tail -3 $OUT/ncu.log
ncu -i $OUT/resident.ncu-rep --page details > $OUT/details.txt 2>&1
ncu -i $OUT/resident.ncu-rep --page source --csv --print-source sass > $OUT/sass.csv 2> $OUT/sass.err
grep -E "Duration|Warp Cycles Per Issued|Issue Slots Busy|Achieved Occupancy|Registers Per|Stall|Block Limit" $OUT/details.txt | cut -c1-150
python3 - $OUT/sass.csv <<'PY'
import csv,sys
rows=list(csv.reader(open(sys.argv[1])))
hdr=rows[1]; data=[r for r in rows[2:] if r and r[0].startswith('0x')]
def n(x):
    try: return int(x)
    except: return 0
tot=sum(n(r[2]) for r in data)
print("samples",tot)
for r in sorted(data,key=lambda r:-n(r[2]))[:25]: print(r[0], r[1][:60], n(r[2]))
PY
(cd $OUT && xz -T4 resident.ncu-rep sass.csv)

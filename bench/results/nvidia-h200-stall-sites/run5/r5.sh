#!/bin/bash
# Run 5: an upper bound, not a result: cuda_tensor's passes with only step 0's slices staged and every step reading
# that slot (.gpu/halcaps_probe.xz, run5/probe_no_staging.diff on d8697c5; its output is wrong by design), against
# d8697c5 (.gpu/halcaps.xz): per kernel at the GPU's clocks, MNIST b128 and b512, to bound what a design with W and u
# resident in shared memory (no copies a step) could save.
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_probe; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
for shape in mnist_b128 mnist_b512; do
  for b in halcaps halcaps_probe; do
    timeout 90 ncu --clock-control none --cache-control none --kernel-name regex:"pass_kernel|squash" --launch-count 6 \
      --metrics gpu__time_duration.sum,smsp__inst_executed.sum \
      --csv $G/$b bench --device cuda --op digitcaps --implementations cuda_tensor --shapes $shape --repeats 1 --warmup 0 \
      --seed 8501 > $OUT/ncu_${b}_$shape.csv 2> $OUT/ncu_${b}_$shape.err
    echo "== $b $shape"; grep -E '"(gpu__time|smsp__inst)' $OUT/ncu_${b}_$shape.csv | awk -F'","' '{split($5,k,"<"); print $1, substr(k[1],1,36), $(NF-2), $NF}' | sed 's/"//g' | head -12
  done
done
(cd $OUT && tar cf ncu.tar ncu_*.csv ncu_*.err && rm ncu_*.csv ncu_*.err)

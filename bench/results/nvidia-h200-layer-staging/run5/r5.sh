#!/bin/bash
# Run 5: cuda_tensor with 2, 3 (committed) or 4 staged steps (kStages in digitcaps_tensor_cores.cu), now that the
# copies are cheap: .gpu/halcaps.xz is the committed binary (3), .gpu/halcaps_s2.xz and .gpu/halcaps_s4.xz the
# same with kStages 2 and 4. Each row is checked against the float64 reference before it is timed (check column).
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_s2 halcaps_s4; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/gpu.txt
for round in 1 2; do
  for b in halcaps_s2 halcaps halcaps_s4; do
    $G/$b bench --device cuda --op digitcaps --shapes mnist_b128,mnist_b512 --implementations cuda_tensor \
      --repeats 30 --seed 550$round > $OUT/bench_${b}_$round.txt 2>&1
    echo "== $b round $round"; grep -E "^digitcaps " $OUT/bench_${b}_$round.txt | awk '{print $2, $3, $5, $6}'
  done
done
(cd $OUT && tar cf bench_rounds.tar bench_halcaps*_*.txt && rm bench_halcaps*_*.txt)

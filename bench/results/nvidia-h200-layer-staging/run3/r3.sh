#!/bin/bash
# Run 3: why run 2's split W was slower: ncu on the pass kernels of one cuda_tensor call at MNIST b128, with
# and without the split (the binaries of run 2: .gpu/halcaps.xz with run2/split_w.diff, .gpu/halcaps_prev.xz
# without).
G=/tmp/bin; mkdir -p $G; for b in halcaps halcaps_prev; do xz -dc .gpu/$b.xz > $G/$b && chmod +x $G/$b; done
M=gpu__time_duration.sum,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,lts__t_bytes.sum,dram__bytes.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__occupancy_limit_shared_mem,launch__shared_mem_per_block_dynamic
for b in halcaps_prev halcaps; do
  ncu --kernel-name regex:pass_kernel --launch-count 3 --metrics $M --csv $G/$b bench --device cuda --op digitcaps \
    --implementations cuda_tensor --shapes mnist_b128 --repeats 1 --warmup 0 --seed 5301 > $OUT/ncu_$b.csv 2> $OUT/ncu_$b.err
  echo "== $b"; grep -E '"(gpu__time|smsp__inst|l1tex__data|lts__t_bytes|dram__bytes|sm__warps|launch__occ|launch__shared)' $OUT/ncu_$b.csv | awk -F'","' '{print $5, $(NF-2), $NF}' | sed 's/"//g' | cut -c1-150
done

#!/usr/bin/env bash
# Run 1c: r1b's ncu again, with the demangled names it needs (r1b matched
# no kernel): the passes storing c (digitcaps_with_c) and the backward's
# plain passes reading c and G (kBackward) at MNIST b128, before the change
# (halcaps_prev) and after (halcaps), at the GPU's clocks with warm caches.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-coefficient-tiles/run1}
mkdir -p "$out" /tmp/bin /tmp/r1c
for name in halcaps_prev halcaps; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
metrics=gpu__time_duration.sum,smsp__inst_executed.sum,lts__t_sectors_op_write.sum,lts__t_requests_op_write.sum
metrics+=,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum
metrics+=,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum
metrics+=,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,dram__bytes_write.sum,dram__bytes_read.sum
for s in long_scoreboard short_scoreboard mio_throttle lg_throttle drain membar barrier wait math_pipe_throttle; do
    metrics+=,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio
done
profile() {  # name op regex count tag
    timeout 120 ncu --kernel-name-base demangled --clock-control none --cache-control none --kernel-name "regex:$3" \
        --launch-count "$4" --metrics "$metrics" --csv \
        /tmp/bin/$1 bench --device cuda --op $2 --implementations cuda_tensor --shapes mnist_b128 \
        --repeats 1 --warmup 0 --seed 9003 > "/tmp/r1c/ncu_$1_$5.csv" 2> "/tmp/r1c/ncu_$1_$5.err"
    echo "== $1 $5"
    grep -E '^"[0-9]' "/tmp/r1c/ncu_$1_$5.csv" | awk -F'","' '{print $1, $(NF-2), $NF}' | sed 's/"//g' |
        grep -E "gpu__time|lts__t_sectors_op_write|inst_executed|op_st.sum|op_ld.sum|long_score|mio|lg_thr|drain" | cut -c1-120
}
for name in halcaps_prev halcaps; do
    profile $name digitcaps 'pass_kernel<.*\(int\)1, \(bool\)1' 2 storing
    profile $name digitcaps_backward 'pass_kernel<.*\(int\)2, \(bool\)0' 3 backward
done
tar cf "$out/r1c.tar" -C /tmp/r1c .

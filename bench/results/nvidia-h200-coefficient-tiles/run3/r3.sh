#!/usr/bin/env bash
# Run 3: run 2 with halcaps_prev = run 2's candidate (c and G loaded and stored
# through the tiles) and halcaps = the backward passes loading c and G_next directly (stored through the tiles still): ncu of the passes storing c and the backward's
# plain passes reading c and G (kBackward) at MNIST b128, before the change
# (halcaps_prev) and after (halcaps), at the GPU's clocks with warm caches.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-coefficient-tiles/run3}
mkdir -p "$out" /tmp/bin /tmp/r3
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
        --repeats 1 --warmup 0 --seed 9003 > "/tmp/r3/ncu_$1_$5.csv" 2> "/tmp/r3/ncu_$1_$5.err"
    echo "== $1 $5"
    grep -E '^"[0-9]' "/tmp/r3/ncu_$1_$5.csv" | awk -F'","' '{print $1, $(NF-2), $NF}' | sed 's/"//g' |
        grep -E "gpu__time|lts__t_sectors_op_write|inst_executed|op_st.sum|op_ld.sum|long_score|mio|lg_thr|drain" | cut -c1-120
}
for name in halcaps_prev halcaps; do
    profile $name digitcaps 'pass_kernel<.*\(int\)1, \(bool\)1' 2 storing
    profile $name digitcaps_backward 'pass_kernel<.*\(int\)2, \(bool\)0' 3 backward
done
for round in 1 2; do
    for name in halcaps_prev halcaps; do
        for op in digitcaps digitcaps_backward; do
            /tmp/bin/$name bench --device cuda --op $op --shapes mnist_b128,mnist_b512 --implementations cuda_tensor \
                --repeats 30 --seed 920$round > "/tmp/r3/bench_${name}_${op}_$round.txt" 2>&1
            echo "== $name $op round $round"; grep -E "^digitcaps" "/tmp/r3/bench_${name}_${op}_$round.txt" | awk '{print $1, $2, $5, $6}'
        done
    done
done
tar cf "$out/r3.tar" -C /tmp/r3 .

#!/usr/bin/env bash
# Run 1b: ncu on the passes that store c (digitcaps_with_c at MNIST b128),
# the binary before the change (halcaps_prev, d438f49) and the candidate
# (halcaps), at the GPU's own clocks with warm caches: time, instructions,
# L1 and L2 traffic of the stores, and where the warps stall; then both
# binaries in turn in `halcaps bench` (two rounds, both ops, cuda_tensor).
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-coefficient-tiles/run1}
mkdir -p "$out" /tmp/bin /tmp/r1b
for name in halcaps_prev halcaps; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
metrics=gpu__time_duration.sum,smsp__inst_executed.sum,lts__t_sectors_op_write.sum,lts__t_requests_op_write.sum
metrics+=,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum
metrics+=,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,dram__bytes_write.sum,dram__bytes_read.sum
for s in long_scoreboard short_scoreboard mio_throttle lg_throttle drain membar barrier wait math_pipe_throttle; do
    metrics+=,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio
done
for name in halcaps_prev halcaps; do
    timeout 150 ncu --clock-control none --cache-control none --kernel-name 'regex:\(int\)1, \(bool\)' \
        --launch-skip 2 --launch-count 4 --metrics "$metrics" --csv \
        /tmp/bin/$name bench --device cuda --op digitcaps --implementations cuda_tensor --shapes mnist_b128 \
        --repeats 1 --warmup 0 --seed 9003 > "/tmp/r1b/ncu_$name.csv" 2> "/tmp/r1b/ncu_$name.err"
    echo "== $name"; grep -E '"(gpu__time|lts__t_sectors_op_write|smsp__inst_exec|l1tex__t_requests_pipe_lsu_mem_global_op_st)' \
        "/tmp/r1b/ncu_$name.csv" | awk -F'","' '{print $5, substr($(NF-3),1,40), $(NF-2), $NF}' | sed 's/"//g' | cut -c1-160
done
for round in 1 2; do
    for name in halcaps_prev halcaps; do
        for op in digitcaps digitcaps_backward; do
            /tmp/bin/$name bench --device cuda --op $op --shapes mnist_b128,mnist_b512 --implementations cuda_tensor \
                --repeats 30 --seed 900$round > "/tmp/r1b/bench_${name}_${op}_$round.txt" 2>&1
            echo "== $name $op round $round"; grep -E "^digitcaps" "/tmp/r1b/bench_${name}_${op}_$round.txt" | awk '{print $1, $2, $5, $6}'
        done
    done
done
tar cf "$out/r1b.tar" -C /tmp/r1b .

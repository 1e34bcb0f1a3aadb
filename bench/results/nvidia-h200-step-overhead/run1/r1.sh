#!/usr/bin/env bash
# The step-overhead probe (branch probe-step-copies): the passes' per-kernel
# time under ncu with HALCAPS_PROBE_STEPS 0 (the library's kernels), 1 (no
# in-loop copies: every step reads the first step's slot) and 3 (no in-loop
# copies and no per-step barrier). Modes 1 and 3 compute wrong sums; they are
# timed only, under ncu (the checked call's launches). Runs from the
# repository root on the GPU machine, with .gpu/halcaps_probe.xz.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-step-overhead/run1}
bin=$(mktemp -d /tmp/probe.XXXX)
xz -dc .gpu/halcaps_probe.xz > "$bin/halcaps_probe" && chmod +x "$bin/halcaps_probe"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
summary="$out/summary.txt"
: > "$summary"
for shape in mnist_b128 mnist_b512; do
    for mode in 0 1 3; do
        csv="$bin/ncu_${shape}_$mode.csv"
        HALCAPS_PROBE_STEPS=$mode timeout 120 ncu --clock-control none --cache-control none \
            --kernel-name "regex:pass_kernel" --launch-count 3 \
            --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread \
            --csv "$bin/halcaps_probe" bench --device cuda --op digitcaps --implementations cuda_tensor \
            --shapes "$shape" --repeats 1 --warmup 0 --seed 9003 > "$csv" 2> "${csv%.csv}.err"
        { echo "== $shape mode $mode (ns, instructions)"; grep -E '"(gpu__time|smsp__inst)' "$csv" |
            awk -F'","' '{split($5,k,"("); print $1, substr(k[1],1,40), $(NF-2), $NF}' | sed 's/"//g'; } >> "$summary"
    done
done
# The whole call, mode 0 (checked and timed as usual), and what bench says in mode 1.
for mode in 0 1; do
    echo "== halcaps bench, mode $mode" >> "$summary"
    HALCAPS_PROBE_STEPS=$mode "$bin/halcaps_probe" bench --device cuda --op digitcaps --implementations cuda_tensor \
        --shapes mnist_b128,mnist_b512 --seed 9004 >> "$summary" 2>&1
done
tar cf "$out/ncu.tar" -C "$bin" $(cd "$bin" && ls ncu_*)
cat "$summary"

#!/usr/bin/env bash
# Run 2: why run 1's candidate was slower at MNIST b512 (and with c kept)
# while faster at b128: ncu's time, instructions, shared-memory load
# wavefronts and bank conflicts, and dynamic shared memory per block, for
# the first three pass kernels of one forward (digitcaps and
# digitcaps_with_c) at b128 and b512, both builds (.gpu as in run 1).
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-v-rows-16b/run2}
mkdir -p "$out"
bin=$(mktemp -d /tmp/v16.XXXX)
for name in halcaps_prev halcaps; do xz -dc .gpu/$name.xz > "$bin/$name"; chmod +x "$bin/$name"; done
metrics=gpu__time_duration.sum,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,launch__shared_mem_per_block_dynamic,launch__occupancy_limit_shared_mem,launch__registers_per_thread
# The forward's first three pass kernels, then (mangled names, Lb1E: the
# passes that store c) digitcaps_with_c's two agreement passes.
for filter in "pass_kernel 3 function" "Lb1E 2 mangled"; do
  read -r regex count base <<< "$filter"
  for shape in mnist_b128 mnist_b512; do
    for name in halcaps_prev halcaps; do
      csv="$out/ncu_${regex}_${name}_$shape.csv"
      timeout 150 ncu --clock-control none --cache-control none --kernel-name-base "$base" --kernel-name "regex:$regex" --launch-count "$count" \
        --metrics "$metrics" --csv "$bin/$name" bench --device cuda --op digitcaps --implementations cuda_tensor \
        --shapes "$shape" --repeats 1 --warmup 0 --seed 9003 > "$csv" 2> "${csv%.csv}.err"
      echo "== $regex $shape $name"
      grep -E '"(gpu__|smsp__|l1tex__|launch__)' "$csv" | awk -F'","' '{print $1, $(NF-2), $NF}' | sed 's/"//g'
    done
  done
done > "$out/summary.txt" 2>&1
tar cf "$out/ncu.tar" -C "$out" $(cd "$out" && ls ncu_*) && rm -f "$out"/ncu_*
cat "$out/summary.txt"

#!/usr/bin/env bash
# Run 1c: run 1b's bench (alternating the build before and after), then one
# checked `halcaps bench` call of the forward under memcheck, before and after,
# 90 s each: does run 1a's time-out come from the tiles' barrier waiting on
# blocks that the sanitizer does not run at once?
# Binaries in .gpu/: halcaps_prev, halcaps.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-squash-at-pass-end/run1}
bash bench/results/nvidia-h200-squash-at-pass-end/run1/r1b.sh
for name in halcaps_prev halcaps; do
    start=$(date +%s)
    timeout 90 compute-sanitizer --tool memcheck /tmp/bin/$name bench --device cuda --op digitcaps \
        --shapes mnist_b128 --implementations cuda_tensor --repeats 1 --warmup 0 > "$out/memcheck_$name.txt" 2>&1
    echo "rc $? after $(( $(date +%s) - start )) s" >> "$out/memcheck_$name.txt"
    echo "== $name"; grep -E "^digitcaps|ERROR SUMMARY|rc " "$out/memcheck_$name.txt" | cut -c1-100
done

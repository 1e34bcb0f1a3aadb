#!/usr/bin/env bash
# Run 1b: `halcaps bench` of cuda_tensor's forward and backward rows at MNIST
# b128 and b512, the build before this change (halcaps_prev, 641ecf0) and
# after it (halcaps: the squash at the passes' end), in turn, two rounds.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-squash-at-pass-end/run1}
mkdir -p "$out" /tmp/bin /tmp/r1
for name in halcaps_prev halcaps; do xz -dc ".gpu/$name.xz" > "/tmp/bin/$name"; chmod +x "/tmp/bin/$name"; done
for round in 1 2; do
    for name in halcaps_prev halcaps; do
        for op in digitcaps digitcaps_backward; do
            timeout 90 /tmp/bin/$name bench --device cuda --op $op --shapes mnist_b128,mnist_b512 \
                --implementations cuda_tensor --repeats 30 --seed 941$round > "/tmp/r1/bench_${name}_${op}_$round.txt" 2>&1
            echo "== $name $op round $round"; grep -E "^digitcaps" "/tmp/r1/bench_${name}_${op}_$round.txt" | awk '{print $1, $2, $5, $6}'
        done
    done
done
tar cJf "$out/r1b.tar.xz" -C /tmp/r1 .

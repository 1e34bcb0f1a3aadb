#!/usr/bin/env bash
# Run 1: the pass kernel writes -inf into b0's staged floats past out_caps
# only in the two modes that read them (kAgreement, kBackwardWithLogits),
# not in the first pass and kBackward (commit 953cdb3), against main's build
# (halcaps_prev: aed4a7e, whose kernels are 222983c's). The CUDA tests that
# cover the layer and both training pairs on the candidate; memcheck,
# racecheck and synccheck on the candidate's forward at two shapes with
# out_caps below the variant's (B:I:K:J:E 37:150:8:9:16, dense, and
# 33:70:5:7:13, not dense), and on its backward (which runs kBackward and
# kBackwardWithLogits) at the same two; three rounds of `halcaps bench`
# alternating the two builds on digitcaps and digitcaps_backward at MNIST
# b128, b512 and 37:150:8:9:16.
set -uo pipefail
out=${OUT:-bench/results/nvidia-h200-b0-padding-modes/run1}
start=$(date +%s)
OP="digitcaps digitcaps_backward" BINARIES="halcaps_prev halcaps" ROUNDS=3 \
SHAPES="mnist_b128,mnist_b512,37:150:8:9:16" SANITIZE_SHAPES="37:150:8:9:16 33:70:5:7:13" TESTS=layer \
    bash bench/gpu_ab.sh "$out"
# The backward's sanitizers (gpu_ab.sh runs them on the first op only).
bin=$(mktemp -d /tmp/r1.XXXX)
xz -dc .gpu/halcaps.xz > "$bin/halcaps" && chmod +x "$bin/halcaps"
for shape in 37:150:8:9:16 33:70:5:7:13; do
    for tool in memcheck racecheck synccheck; do
        timeout 90 compute-sanitizer --tool "$tool" "$bin/halcaps" bench --device cuda --op digitcaps_backward \
            --implementations cuda_tensor --shapes "$shape" --repeats 1 --warmup 0 --seed 9001 2>&1 |
            grep -E "ERROR SUMMARY|RACECHECK SUMMARY|wrong|WRONG" | sed "s/^/$tool backward $shape: /" >> "$out/sanitizer.log"
    done
done
echo "== sanitizer.log"; cat "$out/sanitizer.log"
echo "wall $(( $(date +%s) - start )) s"

#!/usr/bin/env bash
# One A/B run of halcaps binaries on the GPU machine, for a change's
# bench/results directory: the binaries alternating in `halcaps bench`,
# with the candidate's tests and sanitizers first and, if asked, ncu's time
# and instruction count per kernel at the GPU's own clocks.
#
#   bench/gpu_ab.sh OUT_DIR            # run from the repository root
#
# The binaries come xz-compressed in .gpu/ (built on the build machine; the
# GPU machine has no compiler): .gpu/NAME.xz for each NAME in BINARIES, and
# .gpu/halcaps_cuda_tests.xz when TESTS is set. The last name in BINARIES is
# the candidate. Settings (environment):
#   OP               halcaps bench --op, or several space-separated, each
#                    timed in every round (digitcaps). The summary keeps
#                    each op's rows and those of its pairs riding with it
#                    (digitcaps_with_s, digitcaps_backward_with_c, ...).
#   IMPLEMENTATIONS  --implementations (cuda_tensor)
#   SHAPES           --shapes of the timed rounds (mnist_b128,mnist_b512)
#   BINARIES         names in .gpu/, the one before the change first
#                    (halcaps_prev halcaps)
#   ROUNDS           rounds of the binaries in turn, seeds 9001, 9002, ... (2)
#   TESTS            a Catch2 filter for halcaps_cuda_tests ("" skips them;
#                    "all" runs every test; "layer" the tests that cover the
#                    DigitCaps layer and both training pairs, layer_tests
#                    below) ([digitcaps])
#   SANITIZE_SHAPES  shapes for memcheck, racecheck and synccheck on the
#                    candidate, space-separated ("" skips them)
#   NCU_KERNELS      a kernel-name regex for ncu ("" skips ncu)
#   NCU_SHAPES       shapes ncu profiles, comma-separated (mnist_b128)
#   NCU_LAUNCHES     kernels ncu profiles a call (6)
# Everything lands in OUT_DIR: gpu.txt, cuda_tests.log, sanitizer.log,
# bench_rounds.tar, ncu.tar (tar files because the device tool brings back
# a few files a call), and summary.txt, which is also printed.
set -uo pipefail
out=${1:?usage: bench/gpu_ab.sh OUT_DIR}
read -r -a ops <<< "${OP:-digitcaps}"
op=${ops[0]}  # the op the sanitizers and ncu run
implementations=${IMPLEMENTATIONS:-cuda_tensor}
shapes=${SHAPES:-mnist_b128,mnist_b512}
read -r -a binaries <<< "${BINARIES:-halcaps_prev halcaps}"
rounds=${ROUNDS:-2}
tests=${TESTS-[digitcaps]}
# The tests that cover the DigitCaps layer and both training pairs.
layer_tests="[hand_backward],cuda digitcaps: cuda_tensor's training pair*,cuda digitcaps: blog grid*,cuda digitcaps: odd sizes*,cuda digitcaps: MNIST shape*,cuda digitcaps: cuda_tensor's MNIST variant*,cuda digitcaps: the hand-written fused layers*,cuda digitcaps: hard inputs*,cuda digitcaps: the hand-written backward*"
[ "$tests" = layer ] && tests=$layer_tests
sanitize_shapes=${SANITIZE_SHAPES-}
ncu_kernels=${NCU_KERNELS-}
ncu_shapes=${NCU_SHAPES:-mnist_b128}
ncu_launches=${NCU_LAUNCHES:-6}
candidate=${binaries[-1]}

mkdir -p "$out"
bin=$(mktemp -d /tmp/gpu_ab.XXXX)
names=("${binaries[@]}")
[ -n "$tests" ] && names+=(halcaps_cuda_tests)
for name in "${names[@]}"; do
    xz -dc ".gpu/$name.xz" > "$bin/$name" || { echo "no .gpu/$name.xz" >&2; exit 2; }
    chmod +x "$bin/$name"
done
summary="$out/summary.txt"
: > "$summary"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt"
cat "$out/gpu.txt" >> "$summary"

if [ -n "$tests" ]; then
    filter=()
    [ "$tests" != all ] && filter=("$tests")
    timeout 560 "$bin/halcaps_cuda_tests" "${filter[@]}" > "$out/cuda_tests.log" 2>&1
    echo "rc $?" >> "$out/cuda_tests.log"
    { echo "== tests ($tests)"; tail -3 "$out/cuda_tests.log"; grep -B3 -A12 FAILED "$out/cuda_tests.log" | head -40; } >> "$summary"
fi

if [ -n "$sanitize_shapes" ]; then
    : > "$out/sanitizer.log"
    for shape in $sanitize_shapes; do
        for tool in memcheck racecheck synccheck; do
            timeout 60 compute-sanitizer --tool "$tool" "$bin/$candidate" bench --device cuda --op "$op" \
                --implementations "$implementations" --shapes "$shape" --repeats 1 --warmup 0 --seed 9001 2>&1 |
                grep -E "ERROR SUMMARY|RACECHECK SUMMARY|wrong|WRONG" | sed "s/^/$tool $shape: /" >> "$out/sanitizer.log"
        done
    done
    expected=$(( 3 * $(wc -w <<< "$sanitize_shapes") ))
    clean=$(grep -c " 0 errors\| 0 hazards" "$out/sanitizer.log")
    { echo "== sanitizers on $candidate: $clean of $expected clean"; grep -v " 0 errors\| 0 hazards" "$out/sanitizer.log"; } >> "$summary"
fi

rounds_dir=$(mktemp -d /tmp/gpu_ab_rounds.XXXX)
for round in $(seq 1 "$rounds"); do
    for name in "${binaries[@]}"; do
        for timed_op in "${ops[@]}"; do
            log="$rounds_dir/bench_${name}_${timed_op}_$round.txt"
            "$bin/$name" bench --device cuda --op "$timed_op" --shapes "$shapes" --implementations "$implementations" \
                --repeats 30 --seed "900$round" > "$log" 2>&1
            # The op's rows and its pairs' (OP_with_s ...): op, shape, implementation, check, µs.
            { echo "== $name $timed_op round $round"; grep -E "^${timed_op}(_with_[a-z]+)? |wrong|rror" "$log" |
                awk '{print $1, $2, $3, $5, $6}'; } >> "$summary"
        done
    done
done
tar cf "$out/bench_rounds.tar" -C "$rounds_dir" .

if [ -n "$ncu_kernels" ]; then
    ncu_dir=$(mktemp -d /tmp/gpu_ab_ncu.XXXX)
    for name in "${binaries[@]}"; do
        for shape in ${ncu_shapes//,/ }; do
            csv="$ncu_dir/ncu_${name}_$shape.csv"
            timeout 120 ncu --clock-control none --cache-control none --kernel-name "regex:$ncu_kernels" \
                --launch-count "$ncu_launches" \
                --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread \
                --csv "$bin/$name" bench --device cuda --op "$op" --implementations "$implementations" --shapes "$shape" \
                --repeats 1 --warmup 0 --seed 9003 > "$csv" 2> "${csv%.csv}.err"
            { echo "== ncu $shape, $name (ns, instructions)"; grep -E '"(gpu__time|smsp__inst)' "$csv" |
                awk -F'","' '{split($5,k,"("); print $1, substr(k[1],1,48), $(NF-2), $NF}' | sed 's/"//g'; } >> "$summary"
        done
    done
    tar cf "$out/ncu.tar" -C "$ncu_dir" .
fi
cat "$summary"

#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (AddressSanitizer + UndefinedBehavior-
# Sanitizer, clang) on the Halide kernels of a finished build, then runs each
# over its committed corpus, fuzz/corpus/<target>.
#
#   scripts/fuzz.sh [SECONDS [TARGET...]]
#
#   SECONDS   how long each target runs (default 60)
#   TARGET    npy, prediction, routing, capsconv (default: all four)
#
# Environment:
#   KERNEL_BUILD  the finished build whose kernels are linked (default build/)
#   FUZZ_BUILD    the sanitized build directory (default build-sanitize/)
#   FUZZ_PARALLEL targets run at once (default 2)
#   FUZZ_MERGE=1  afterwards, minimise what the run found together with the
#                 corpus (libFuzzer -merge=1) back into fuzz/corpus/<target>
#   FUZZ_NICE     nice level of the fuzzers (default 0; 19 on a shared machine)
#
# New inputs go to FUZZ_BUILD/fuzz-work/<target>/ (the committed corpus is
# only read unless FUZZ_MERGE=1); a crash is written there too (crash-*),
# its log is FUZZ_BUILD/fuzz-work/<target>.log, and the script exits 1.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
seconds="${1:-60}"
shift || true
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(npy prediction routing capsconv)
kernel_build="${KERNEL_BUILD:-$repo/build}"
fuzz_build="${FUZZ_BUILD:-$repo/build-sanitize}"
parallel="${FUZZ_PARALLEL:-2}"
nice_level="${FUZZ_NICE:-0}"
[[ -d .venv/bin ]] && export PATH="$repo/.venv/bin:$PATH"

bash scripts/sanitized-build.sh "$kernel_build" "$fuzz_build" "${targets[@]/#/fuzz_}"

work="$fuzz_build/fuzz-work"
mkdir -p "$work"
run_one() {
    local target="$1" corpus="$repo/fuzz/corpus/$1"
    local args=(-max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 -print_final_stats=1
                -artifact_prefix="$work/$target/")
    [[ -f "$repo/fuzz/$target.dict" ]] && args+=(-dict="$repo/fuzz/$target.dict")
    mkdir -p "$work/$target" "$corpus"
    nice -n "$nice_level" "$fuzz_build/fuzz_$target" "${args[@]}" "$work/$target" "$corpus" >"$work/$target.log" 2>&1
}

failed=0
pids=() names=()
finish() {  # waits for the oldest running target
    local rc=0
    wait "${pids[0]}" || rc=$?
    local target="${names[0]}"
    pids=("${pids[@]:1}") names=("${names[@]:1}")
    local runs
    runs="$(grep -m1 -o 'stat::number_of_executed_units: [0-9]*' "$work/$target.log" | grep -o '[0-9]*$' || echo '?')"
    if [[ $rc -eq 0 ]]; then
        echo "fuzz_$target: clean, $runs runs in ${seconds}s"
    else
        echo "fuzz_$target: FAILED (exit $rc); see $work/$target.log:"
        grep -m3 -E 'fuzz check failed|ERROR: |SUMMARY: |Test unit written' "$work/$target.log" | sed 's/^/    /' || true
        failed=1
    fi
}
for target in "${targets[@]}"; do
    [[ ${#pids[@]} -lt $parallel ]] || finish
    run_one "$target" &
    pids+=($!) names+=("$target")
done
while [[ ${#pids[@]} -gt 0 ]]; do finish; done

if [[ "${FUZZ_MERGE:-0}" == 1 ]]; then
    for target in "${targets[@]}"; do
        merged="$work/$target.merged"
        rm -rf "$merged" && mkdir -p "$merged"
        nice -n "$nice_level" "$fuzz_build/fuzz_$target" -merge=1 -rss_limit_mb=2048 "$merged" \
            "$repo/fuzz/corpus/$target" "$work/$target" >"$work/$target.merge.log" 2>&1
        rm -rf "$repo/fuzz/corpus/$target" && mv "$merged" "$repo/fuzz/corpus/$target"
        echo "fuzz_$target: corpus minimised to $(ls "$repo/fuzz/corpus/$target" | wc -l) inputs," \
             "$(du -sk "$repo/fuzz/corpus/$target" | cut -f1) kB"
    done
fi
exit "$failed"

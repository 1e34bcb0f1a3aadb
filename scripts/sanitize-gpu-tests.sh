#!/usr/bin/env bash
# Run the GPU test binary under NVIDIA compute-sanitizer with each of its tools
# (memcheck, racecheck, initcheck, synccheck) and print one
# summary line per tool.
#
#   scripts/sanitize-gpu-tests.sh [TEST_BINARY [CATCH2_ARGS...]]
#   scripts/sanitize-gpu-tests.sh -- [CATCH2_ARGS...]     # default binary, with a filter
#
#   TEST_BINARY   default build/tests/halcaps_cuda_tests (in the repository)
#   CATCH2_ARGS   passed to the binary unchanged, e.g. "[cuda][grid]"
#
# Environment:
#   SANITIZER_LOG_DIR  where the logs go (default build/sanitizer-logs in the
#                      repository): TOOL.log is compute-sanitizer's report,
#                      TOOL.out the tests' own output, plain.out the run without
#                      the sanitizer.
#   COMPUTE_SANITIZER  the compute-sanitizer executable (default: PATH, then
#                      $CUDA_HOME, $CUDA_PATH, /usr/local/cuda, /usr/local/cuda-*).
#
# The binary is first run once without the sanitizer. If it exits 77 (no CUDA
# device) the script says the GPU tests were skipped and exits 77; nothing is
# reported clean.
#
# Exit status: 0 every tool clean and the tests passed; 1 a tool found errors,
# the tests failed or a sanitizer run gave no summary; 77 skipped, no CUDA
# device; 2 bad usage or no compute-sanitizer.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools=(memcheck racecheck initcheck synccheck)

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}

die() {
    echo "sanitize-gpu-tests: error: $*" >&2
    exit 2
}

binary="$repo/build/tests/halcaps_cuda_tests"
if [[ $# -gt 0 ]]; then
    case "$1" in
        -h | --help) usage; exit 0 ;;
        --) shift ;;
        *) binary="$1"; shift ;;
    esac
fi
test_args=("$@")
shown="$binary${test_args[*]:+ ${test_args[*]}}"

[[ -e "$binary" ]] || die "no test binary at $binary (build it first: scripts/setup.sh)"
[[ -f "$binary" && -x "$binary" ]] || die "$binary is not an executable file"
case "$binary" in
    */*) ;;
    *) binary="./$binary" ;;  # never looked up on PATH
esac

log_dir="${SANITIZER_LOG_DIR:-$repo/build/sanitizer-logs}"
mkdir -p "$log_dir" || die "cannot create the log directory $log_dir"

# 1. Once without the sanitizer: is there a device at all, and do the tests pass?
echo "== $shown (no sanitizer) -> $log_dir/plain.out"
plain_rc=0
"$binary" ${test_args[@]+"${test_args[@]}"} >"$log_dir/plain.out" 2>&1 || plain_rc=$?
if [[ $plain_rc -eq 77 ]]; then
    grep -m1 -i 'skip' "$log_dir/plain.out" || true
    echo "GPU tests skipped: no CUDA device on this machine; nothing was sanitized (exit 77)"
    exit 77
fi
if [[ $plain_rc -ne 0 ]]; then
    echo "warning: the tests fail even without the sanitizer (exit $plain_rc); last lines of plain.out:"
    tail -n 15 "$log_dir/plain.out" | sed 's/^/    /'
fi

# 2. Find compute-sanitizer.
find_sanitizer() {
    if [[ -n "${COMPUTE_SANITIZER:-}" ]]; then
        [[ -x "$COMPUTE_SANITIZER" ]] || die "COMPUTE_SANITIZER=$COMPUTE_SANITIZER is not executable"
        echo "$COMPUTE_SANITIZER"
        return
    fi
    if command -v compute-sanitizer >/dev/null 2>&1; then
        command -v compute-sanitizer
        return
    fi
    local root candidate
    local roots=()
    [[ -n "${CUDA_HOME:-}" ]] && roots+=("$CUDA_HOME")
    [[ -n "${CUDA_PATH:-}" ]] && roots+=("$CUDA_PATH")
    roots+=(/usr/local/cuda)
    while IFS= read -r root; do
        [[ -d "$root" ]] && roots+=("$root")
    done < <(printf '%s\n' /usr/local/cuda-* | sort -rV)  # newest version first
    for root in "${roots[@]}"; do
        for candidate in "$root/bin/compute-sanitizer" "$root/compute-sanitizer/compute-sanitizer"; do
            if [[ -x "$candidate" ]]; then
                echo "$candidate"
                return
            fi
        done
    done
    die "compute-sanitizer not found (put it on PATH or set COMPUTE_SANITIZER)"
}
sanitizer="$(find_sanitizer)"
echo "== $("$sanitizer" --version 2>/dev/null | grep -m1 -i version || echo "version unknown") ($sanitizer)"

# Errors a log reports: the sum of its "ERROR SUMMARY: N errors" lines and, for
# racecheck, of the errors in "RACECHECK SUMMARY: H hazards displayed (N errors,
# W warnings)"; empty when the log has no summary at all.
count_errors() {
    local log="$1"
    [[ -f "$log" ]] || return 0
    awk '
        /ERROR SUMMARY: [0-9]+ error/ {
            match($0, /ERROR SUMMARY: [0-9]+/); n = substr($0, RSTART + 15, RLENGTH - 15); total += n; seen = 1
        }
        /RACECHECK SUMMARY:.*\([0-9]+ error/ {
            match($0, /\([0-9]+ error/); n = substr($0, RSTART + 1, RLENGTH - 7); race += n; seen = 1
        }
        END { if (seen) print (race > total ? race : total) + 0 }
    ' "$log"
}

race_warnings() {
    awk '/RACECHECK SUMMARY:.*[0-9]+ warning/ {
            match($0, /[0-9]+ warning/); w += substr($0, RSTART, RLENGTH - 8)
         }
         END { print w + 0 }' "$1"
}

# 3. One run per tool.
summary=()
failed=0
for tool in "${tools[@]}"; do
    log="$log_dir/$tool.log"
    out="$log_dir/$tool.out"
    rm -f "$log" "$out"
    args=(--tool "$tool" --error-exitcode 1 --log-file "$log")
    # No --leak-check: two process-lifetime caches are by design still held at
    # exit (the cuBLAS handle with its workspace, and Halide's cache of device
    # allocations), and leak checking reports each as an error. Set
    # SANITIZER_LEAK_CHECK=1 to see them.
    [[ $tool == memcheck && ${SANITIZER_LEAK_CHECK:-0} == 1 ]] && args+=(--leak-check full)
    echo "== $tool ..."
    start=$SECONDS
    rc=0
    "$sanitizer" "${args[@]}" "$binary" ${test_args[@]+"${test_args[@]}"} >"$out" 2>&1 || rc=$?
    took=$((SECONDS - start))
    errors="$(count_errors "$log")"

    if [[ $rc -eq 77 && -z "$errors" ]]; then
        line="skipped: the binary found no CUDA device under the sanitizer (exit 77)"
        failed=1
    elif [[ -z "$errors" ]]; then
        line="FAILED: no summary in $log (compute-sanitizer exit $rc; see $out)"
        first_error="$(grep -m1 -o 'Error: .*' "$log" 2>/dev/null || true)"
        [[ -z "$first_error" ]] || line+=": $first_error"
        failed=1
    elif [[ $errors -gt 0 ]]; then
        line="$errors error$([[ $errors -eq 1 ]] || echo s) (see $log)"
        failed=1
    elif [[ $rc -ne 0 ]]; then
        line="0 sanitizer errors, but the tests failed (exit $rc; see $out)"
        failed=1
    else
        line="clean"
    fi
    if [[ $tool == racecheck && -f "$log" ]]; then
        w="$(race_warnings "$log")"
        [[ $w -eq 0 ]] || line+=", $w race warning$([[ $w -eq 1 ]] || echo s)"
    fi
    summary+=("$(printf '%-10s %s  [%ss]' "$tool" "$line" "$took")")
done

echo
echo "compute-sanitizer summary for $shown"
printf '  %s\n' "${summary[@]}"
if [[ $plain_rc -ne 0 ]]; then
    echo "  (without the sanitizer the tests also failed: exit $plain_rc, see $log_dir/plain.out)"
    failed=1
fi
echo "logs: $log_dir"
exit "$failed"

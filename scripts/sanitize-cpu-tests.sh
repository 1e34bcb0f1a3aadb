#!/usr/bin/env bash
# Builds the runtime, the CLI, the float64 reference and the CPU tests with
# AddressSanitizer and UndefinedBehaviorSanitizer (clang, a separate build
# directory; the Halide kernels' archives come from a finished build, since
# they are generated code) and runs the CPU tests and the CLI checks under
# them. Any sanitizer report fails the test it happens in.
#
#   scripts/sanitize-cpu-tests.sh [CTEST_ARGS...]     e.g. -R cli_
#
# Environment:
#   KERNEL_BUILD   the finished build whose kernels are linked (default build/)
#   SANITIZE_BUILD the sanitized build directory (default build-sanitize/)
#   SANITIZE_QUICK=1  only the CLI's checks (cli_*) and the quick CPU tests
#                  (errors, npy, odd, gradient), as scripts/run-tests.sh runs
#                  them: minutes less than all of them (cpu_routing and
#                  cpu_mnist alone take about 4 and 3 minutes here)
#
# Not run here, each for its reason: the CUDA tests (not built: the
# sanitized runtime has no CUDA; scripts/sanitize-gpu-tests.sh covers the GPU
# with compute-sanitizer); downstream_install (it installs and builds the
# ordinary libraries, none of this build's); cli_explore (it compiles schedule
# points with the Halide generator, minutes of generator work that no
# sanitizer sees); plot_bench and plot_timeline (Python scripts).
#
# No suppressions: the runs are clean without them.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
kernel_build="${KERNEL_BUILD:-$repo/build}"
sanitize_build="${SANITIZE_BUILD:-$repo/build-sanitize}"
[[ -d "$repo/.venv/bin" ]] && export PATH="$repo/.venv/bin:$PATH"

start=$SECONDS
targets=(halcaps_cli halcaps_tests)
only=()
if [[ "${SANITIZE_QUICK:-0}" == 1 ]]; then
    only=(-R '^(cli_|cpu_errors$|cpu_npy$|cpu_odd$|cpu_gradient$)')
fi
bash "$repo/scripts/sanitized-build.sh" "$kernel_build" "$sanitize_build" "${targets[@]}"
echo "sanitize-cpu-tests: built in $((SECONDS - start)) s"

# Stop at the first report, with a stack; leaks are reported at exit (a leak fails the test).
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
cd "$sanitize_build"
run_start=$SECONDS
rc=0
ctest --output-on-failure -j "$(nproc)" -E '^(cuda_|opencl_|downstream_install$|cli_explore$|plot_)' ${only[@]+"${only[@]}"} "$@" ||
    rc=$?
# A test judged by its output alone (PASS_REGULAR_EXPRESSION) passes whatever
# its exit status, so a report printed after the expected output (a leak at
# exit) is looked for in the logs as well.
reports="$(grep -c -E 'ERROR: (Address|Leak)Sanitizer|runtime error:|SUMMARY: UndefinedBehaviorSanitizer' \
               Testing/Temporary/LastTest.log || true)"
if [[ "$reports" != 0 ]]; then
    echo "sanitize-cpu-tests: $reports sanitizer report line(s) in $sanitize_build/Testing/Temporary/LastTest.log:"
    grep -m5 -E 'ERROR: (Address|Leak)Sanitizer|runtime error:|SUMMARY: UndefinedBehaviorSanitizer' \
        Testing/Temporary/LastTest.log | sed 's/^/    /'
    rc=1
fi
echo "sanitize-cpu-tests: tests ran in $((SECONDS - run_start)) s (exit $rc)"
exit "$rc"

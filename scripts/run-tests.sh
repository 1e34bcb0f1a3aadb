#!/usr/bin/env bash
# Set up and build (scripts/setup.sh), then run every test. GPU tests report
# "skipped" (not "passed") when no CUDA device is present.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cd build
status=0
ctest --output-on-failure -j "$(nproc)" || status=$?
cd ..
# Sanitizers and fuzzing on the CPU (fuzz/README.md): the CLI's checks and
# the quick CPU tests built with AddressSanitizer and UndefinedBehavior-
# Sanitizer on build/'s kernels, then each libFuzzer target for a minute over
# its committed corpus. HALCAPS_CI_SANITIZE=0 leaves them out.
if [[ "${HALCAPS_CI_SANITIZE:-1}" == 1 ]]; then
    SANITIZE_QUICK=1 bash scripts/sanitize-cpu-tests.sh || status=1
    bash scripts/fuzz.sh 60 || status=1
fi
exit "$status"

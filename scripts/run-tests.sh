#!/usr/bin/env bash
# Set up and build (scripts/setup.sh), then run every test. GPU tests report
# "skipped" (not "passed") when no CUDA device is present.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cd build
exec ctest --output-on-failure -j "$(nproc)"

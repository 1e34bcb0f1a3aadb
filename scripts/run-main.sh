#!/usr/bin/env bash
# Set up and build (scripts/setup.sh), then run the main job: capsule
# prediction and both gradients on the MNIST CapsNet shape, every
# implementation checked against the float64 reference and timed, on CUDA
# when a device is present, otherwise on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec build/halcaps predict --backward --schedule all --device auto "$@"

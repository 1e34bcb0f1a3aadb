#!/usr/bin/env bash
# Configures and builds fuzz/CMakeLists.txt: the runtime, CLI, reference and
# CPU tests (and the fuzz targets) with clang and -fsanitize=address,undefined,
# linking the Halide kernel archives of a finished build instead of
# generating them again. Shared by scripts/sanitize-cpu-tests.sh and
# scripts/fuzz.sh.
#
#   scripts/sanitized-build.sh KERNEL_BUILD SANITIZED_BUILD [TARGET...]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
kernel_build="$(cd "$1" && pwd)"
sanitized_build="$2"
shift 2
[[ -d "$repo/.venv/bin" ]] && export PATH="$repo/.venv/bin:$PATH"
if [[ ! -f "$kernel_build/generated/kernel_registry_table.cpp" ]]; then
    echo "sanitized-build: $kernel_build is not a finished build of halcaps (run scripts/setup.sh first)" >&2
    exit 2
fi
cxx="${SANITIZER_CXX:-$(command -v clang++-14 || command -v clang++ || true)}"
[[ -n "$cxx" ]] || { echo "sanitized-build: no clang++ (apt-get install clang-14 libclang-rt-14-dev libomp-14-dev)" >&2; exit 2; }
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [[ ! -f "$sanitized_build/CMakeCache.txt" ]]; then
    cmake -S "$repo/fuzz" -B "$sanitized_build" "${generator[@]}" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE= \
          -DHALCAPS_KERNEL_BUILD="$kernel_build" >/dev/null
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$sanitized_build" -j "$(nproc)" "${targets[@]}"

#!/usr/bin/env bash
# Builds the PyTorch extension (_halcaps_ops.so) against another torch than
# the one in .venv, from the static libraries of an existing build:
#   scripts/build-torch-extension.sh TORCH_DIR OUTDIR [BUILD_DIR]
# TORCH_DIR: a torch package directory with include/ and lib/ (an installed
# torch, or one unpacked from its wheel: `unzip torch-*.whl 'torch/include/*'
# 'torch/lib/*'`); it need not be importable here, the extension uses no
# Python API. BUILD_DIR (default build/) must hold a finished build
# (scripts/setup.sh); its halcaps_link_libraries.txt lists what to link.
# Load the result with HALCAPS_TORCH_LIBRARY=OUTDIR/_halcaps_ops.so.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 2 ]; then
    sed -n '2,10p' "$0"
    exit 2
fi
torch_dir=$(cd "$1" && pwd)
mkdir -p "$2"
out_dir=$(cd "$2" && pwd)
build_dir=$(cd "${3:-$root/build}" && pwd)
link_list="$build_dir/halcaps_link_libraries.txt"
for required in "$torch_dir/include/torch/library.h" "$torch_dir/lib/libtorch_cpu.so" "$link_list"; do
    [ -e "$required" ] || { echo "build-torch-extension: missing $required" >&2; exit 1; }
done
mapfile -t libraries < "$link_list"
for library in "${libraries[@]}"; do
    case "$library" in -*) ;; *) [ -e "$library" ] || { echo "build-torch-extension: $library not built (run scripts/setup.sh)" >&2; exit 1; } ;; esac
done
version=$(sed -n "s/^__version__ = '\(.*\)'/\1/p" "$torch_dir/version.py" 2>/dev/null || true)
echo "[build-torch-extension] torch ${version:-(version unknown)} from $torch_dir"
# The project's warnings as errors, as in the CMake build (cmake/HalcapsWarnings.cmake);
# torch's headers are system headers. HALCAPS_WARNINGS_AS_ERRORS=OFF keeps them warnings.
warnings=(-Wall -Wextra -Werror)
[[ "${HALCAPS_WARNINGS_AS_ERRORS:-ON}" == OFF ]] && warnings=(-Wall -Wextra)
${CXX:-g++} -std=c++20 -O2 -fPIC -shared -D_GLIBCXX_USE_CXX11_ABI=1 "${warnings[@]}" \
    -I "$root/runtime/include" -isystem "$torch_dir/include" -isystem "$torch_dir/include/torch/csrc/api/include" \
    "$root/python/halcaps/csrc/torch_ops.cpp" -o "$out_dir/_halcaps_ops.so" \
    -Wl,--start-group "${libraries[@]}" -Wl,--end-group \
    -L "$torch_dir/lib" -ltorch_cpu -lc10 -ldl \
    -Wl,--exclude-libs,ALL -Wl,--no-undefined
echo "[build-torch-extension] wrote $out_dir/_halcaps_ops.so"

#!/usr/bin/env bash
# Installs whatever is missing on a Debian machine and builds halcaps in build/.
#   Debian packages: Catch2 2.x, CLI11, a C++ compiler, Python's venv, clang 14
#                    with its sanitizer and libFuzzer runtimes and OpenMP (the
#                    sanitized build and the fuzz targets: fuzz/README.md), and
#                    OpenCL (PoCL's CPU device, the ICD loader and its headers:
#                    the GPU schedules' OpenCL build and its tests)
#   .venv/: Halide 21.0.0, CMake and Ninja from PyPI (requirements.txt);
#           PyTorch, pytest, scikit-learn and scikit-build-core (requirements-torch.txt),
#           then the halcaps Python package, installed from build/ (HALCAPS_WITH_TORCH=OFF skips these)
#   CUDA: the toolkit already on the machine (nvcc on PATH or in /usr/local/cuda);
#         without it the CUDA parts are skipped and everything else builds.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[setup] %s\n' "$*"; }

# --- Debian packages -------------------------------------------------------
missing=()
for package in catch2 libcli11-dev g++ python3-venv clang-14 libclang-rt-14-dev libomp-14-dev pocl-opencl-icd ocl-icd-libopencl1 ocl-icd-opencl-dev; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
    say "installing Debian packages: ${missing[*]}"
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# --- Python tools in .venv -------------------------------------------------
stamp=.venv/requirements.sha256
wanted=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
    say "creating .venv (requirements.txt: Halide 21.0.0, CMake, Ninja)"
    python3 -m venv .venv
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -r requirements.txt
    echo "$wanted" > "$stamp"
fi
with_torch=${HALCAPS_WITH_TORCH:-ON}
torch_stamp=.venv/requirements-torch.sha256
wanted_torch=$(sha256sum requirements-torch.txt | cut -d' ' -f1)
if [ "$with_torch" = ON ] && { [ ! -f "$torch_stamp" ] || [ "$(cat "$torch_stamp")" != "$wanted_torch" ]; }; then
    say "installing PyTorch and the Python test tools into .venv (requirements-torch.txt)"
    .venv/bin/python -m pip install -q -r requirements-torch.txt
    echo "$wanted_torch" > "$torch_stamp"
fi
export PATH="$PWD/.venv/bin:$PATH"
halide_dir=$(.venv/bin/python -c 'import halide, os; print(os.path.join(os.path.dirname(halide.__file__), "lib64", "cmake", "Halide"))')

# --- CUDA (optional) -------------------------------------------------------
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
fi
if command -v nvcc >/dev/null; then
    say "CUDA toolkit: $(nvcc --version | tail -n 2 | head -n 1)"
else
    say "no CUDA toolkit (nvcc) found: building without the CUDA schedules, kernels and GPU tests"
fi

# --- configure and build ---------------------------------------------------
say "building in build/"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DHalide_DIR="$halide_dir" \
      -DHALCAPS_WITH_TORCH="$with_torch" -DPython3_EXECUTABLE="$PWD/.venv/bin/python" >/dev/null
cmake --build build -j "$(nproc)"

# --- the Python package ----------------------------------------------------
# pip runs the package build (pyproject.toml) in build/ itself: the kernels
# built above are up to date, so it only installs the extension and python/.
if [ "$with_torch" = ON ]; then
    say "installing the halcaps Python package into .venv (from build/)"
    .venv/bin/python -m pip install -q --no-build-isolation --no-deps -C build-dir=build .
fi

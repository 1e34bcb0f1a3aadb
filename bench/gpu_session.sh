#!/usr/bin/env bash
# One session's checks of the built binaries on the GPU machine (the device
# tool's H200), from the repository root, writing into OUT_DIR:
#
#   bench/gpu_session.sh OUT_DIR tests   # device facts, every CUDA test, the
#                                        # OpenCL twins on the machine's OpenCL
#                                        # platforms (if it has any)
#   bench/gpu_session.sh OUT_DIR torch   # the PyTorch operators' CUDA tests and
#                                        # the CapsNet training step, b128 and b512
#   bench/gpu_session.sh OUT_DIR bench   # halcaps bench over every operator
#
# The binaries come xz-compressed in .gpu/ (built on the build machine, which
# has nvcc but no GPU): halcaps.xz (the CLI), halcaps_cuda_tests.xz and
# _halcaps_ops.so.xz (the PyTorch extension built against the GPU machine's
# torch by scripts/build-torch-extension.sh), and COMMIT, the commit they were
# built at.
set -uo pipefail
out=${1:?usage: bench/gpu_session.sh OUT_DIR tests|torch|bench}
mode=${2:?usage: bench/gpu_session.sh OUT_DIR tests|torch|bench}
mkdir -p "$out"
bin=$(mktemp -d /tmp/gpu_session.XXXX)
for packed in .gpu/*.xz; do
    name=$(basename "$packed" .xz)
    xz -dc "$packed" > "$bin/$name" && chmod +x "$bin/$name"
done
# OpenCL on the GPU machine: its ICD loader lists PoCL only (seen 2026-12-01),
# while the driver's libnvidia-opencl is there; register it for this run.
if ldconfig -p | grep -q "libnvidia-opencl.so.1" && [ ! -e /etc/OpenCL/vendors/nvidia.icd ]; then
    mkdir -p /tmp/ocl/vendors && echo libnvidia-opencl.so.1 > /tmp/ocl/vendors/nvidia.icd
    export OCL_ICD_VENDORS=/tmp/ocl/vendors HL_OCL_PLATFORM_NAME=NVIDIA
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

case "$mode" in
tests)
    { nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv
      echo "binaries built at commit $(cat .gpu/COMMIT 2>/dev/null)"
      python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'
      echo "OpenCL vendors: $(ls /etc/OpenCL/vendors 2>/dev/null | tr '\n' ' ')"
      echo "OpenCL libraries: $(ldconfig -p | grep -i -o 'lib[a-z-]*opencl[^ ]*' | sort -u | tr '\n' ' ')"
      "$bin/halcaps" info 2>&1 | grep -i -m3 "opencl"; } > "$out/gpu.txt" 2>&1
    cat "$out/gpu.txt"
    timeout 560 "$bin/halcaps_cuda_tests" --durations yes > "$out/cuda_tests.log" 2>&1
    echo "rc $?" >> "$out/cuda_tests.log"
    tail -4 "$out/cuda_tests.log"
    grep -B2 -A14 "FAILED" "$out/cuda_tests.log" | head -60
    # The OpenCL twins on the GPU's own OpenCL platform, where it has one.
    if "$bin/halcaps" info 2>&1 | grep -qi "opencl device:.*nvidia"; then
        timeout 120 "$bin/halcaps" bench --device opencl --op predict --shapes mnist_b128 --repeats 5 \
            > "$out/opencl_bench.txt" 2>&1
        tail -20 "$out/opencl_bench.txt"
    fi
    ;;
torch)
    export HALCAPS_TORCH_LIBRARY=$bin/_halcaps_ops.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
    timeout 300 python3 -m pytest -q -p no:cacheprovider -rs -rx -m cuda tests/python > "$out/pytest_cuda.txt" 2>&1
    echo "rc $?" >> "$out/pytest_cuda.txt"
    tail -25 "$out/pytest_cuda.txt"
    for batch in 128 512; do
        timeout 200 python3 bench/torch_training_step.py --device cuda --batch "$batch" --repeats 30 \
            --json "$out/training_step_b$batch.json" > "$out/training_step_b$batch.txt" 2>&1
        tail -25 "$out/training_step_b$batch.txt"
    done
    ;;
bench)
    timeout 560 "$bin/halcaps" bench --device cuda --repeats 30 --seed 112 \
        --json "$out/all-ops.json" --markdown "$out/all-ops.md" > "$out/all-ops.txt" 2>&1
    echo "rc $?" >> "$out/all-ops.txt"
    tail -40 "$out/all-ops.txt"
    ;;
esac

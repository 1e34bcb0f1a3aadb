# The C++ runtime's sources (runtime/src), relative to the repository root:
# one list for the main build and the sanitized build (fuzz/CMakeLists.txt).
set(HALCAPS_RUNTIME_SOURCES
    runtime/src/argument_checks.cpp
    runtime/src/predict.cpp
    runtime/src/capsconv.cpp
    runtime/src/capsconv_implementations.cpp
    runtime/src/cuda_support.cpp
    runtime/src/digitcaps.cpp
    runtime/src/halide_call.cpp
    runtime/src/host_blocks.cpp
    runtime/src/hand_cuda.cpp
    runtime/src/hand_cuda_capsconv.cpp
    runtime/src/implementations.cpp
    runtime/src/kernel_registry.cpp
    runtime/src/opencl_support.cpp
    runtime/src/operator_support.cpp
    runtime/src/predict_implementations.cpp
    runtime/src/routing_implementations.cpp
    runtime/src/routing_steps.cpp
    runtime/src/status.cpp)

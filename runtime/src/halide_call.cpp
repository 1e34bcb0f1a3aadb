#include "halide_call.h"

#include <cstdio>
#include <mutex>

#include "cuda_support.h"

namespace halcaps::detail {

namespace {

// Halide reports errors through a process-wide handler; ours files the text
// under the call that raised it (its user context) instead of printing it.
void on_halide_error(void *user_context, const char *message) {
    auto *call = static_cast<CallContext *>(user_context);
    if (call != nullptr) {
        call->error_text += message;
    } else {
        std::fprintf(stderr, "halcaps: Halide error outside a call: %s\n", message);
    }
}

void install_error_handler() {
    static std::once_flag installed;
    std::call_once(installed, [] { halide_set_error_handler(on_halide_error); });
}

bool is_device_error(int code) {
    switch (code) {
    case halide_error_code_copy_to_host_failed:
    case halide_error_code_copy_to_device_failed:
    case halide_error_code_device_malloc_failed:
    case halide_error_code_device_sync_failed:
    case halide_error_code_device_free_failed:
    case halide_error_code_no_device_interface:
    case halide_error_code_device_run_failed:
    case halide_error_code_gpu_device_error:
    case halide_error_code_device_wrap_native_failed:
    case halide_error_code_device_detach_native_failed:
    case halide_error_code_device_interface_no_device:
    case halide_error_code_device_buffer_copy_failed:
        return true;
    default:
        return false;
    }
}

// Trims the trailing newline Halide puts on its messages.
std::string one_line(std::string text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    return text;
}

}  // namespace

HalideTensor::HalideTensor(const TensorView &view) : view_(view), dims_(view.shape.size()) {
    // Halide lists dimensions innermost first; the view is dense row-major.
    int32_t stride = 1;
    for (size_t d = 0; d < dims_.size(); d++) {
        const size_t outer_index = view.shape.size() - 1 - d;
        dims_[d] = halide_dimension_t(0, static_cast<int32_t>(view.shape[outer_index]), stride);
        stride *= static_cast<int32_t>(view.shape[outer_index]);
    }
    buffer_.type = halide_type_t(halide_type_float, 32);
    buffer_.dimensions = static_cast<int32_t>(dims_.size());
    buffer_.dim = dims_.data();
    if (view.space == MemorySpace::host) {
        buffer_.host = reinterpret_cast<uint8_t *>(view.data);
    }
}

Status status_from_halide(const char *op, int error_code, const std::string &error_text) {
    if (error_code == halide_error_code_success) return Status::success();
    std::string message = std::string(op) + ": kernel failed (Halide error " + std::to_string(error_code) + ")";
    if (!error_text.empty()) message += ": " + one_line(error_text);
    if (error_code == halide_error_code_out_of_memory) return {StatusCode::out_of_memory, message};
    if (is_device_error(error_code)) return {StatusCode::cuda_error, message};
    return {StatusCode::internal_error, message};
}

Status run_halide(const char *op, HalideKernel3 kernel, Device device, const Options &options, const TensorView &in0,
                  const TensorView &in1, const TensorView &out) {
    install_error_handler();
    CallContext call;
    HalideTensor buffers[3] = {HalideTensor(in0), HalideTensor(in1), HalideTensor(out)};

    if (device == Device::cpu) {
        int code = kernel(&call, buffers[0].raw(), buffers[1].raw(), buffers[2].raw());
        return status_from_halide(op, code, call.error_text);
    }

    if (Status s = resolve_cuda_context(options, &call.cuda_context); !s.ok()) {
        return {s.code, std::string(op) + ": " + s.message};
    }
    call.cuda_stream = options.cuda_stream;
    const bool on_device = out.space == MemorySpace::cuda;

    int code = halide_error_code_success;
    if (on_device) {
        for (auto &b : buffers) {
            if (code == halide_error_code_success) code = wrap_device_pointer(&call, b.raw(), b.view().data);
        }
        for (int input = 0; input < 2; input++) buffers[input].raw()->set_device_dirty(true);
    } else {
        for (int input = 0; input < 2; input++) buffers[input].raw()->set_host_dirty(true);
    }
    if (code == halide_error_code_success) {
        code = kernel(&call, buffers[0].raw(), buffers[1].raw(), buffers[2].raw());
    }
    if (code == halide_error_code_success && !on_device) {
        code = halide_copy_to_host(&call, buffers[2].raw());
    }
    // Let go of device memory: detach what the caller owns, free what Halide
    // allocated for host tensors. Keep the first error.
    for (auto &b : buffers) {
        if (b.raw()->device == 0) continue;
        int release = on_device ? detach_device_pointer(&call, b.raw()) : halide_device_free(&call, b.raw());
        if (code == halide_error_code_success) code = release;
    }
    return status_from_halide(op, code, call.error_text);
}

}  // namespace halcaps::detail

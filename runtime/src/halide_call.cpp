#include "halide_call.h"

#include <cstdint>
#include <cstdio>
#include <mutex>

#include "cuda_support.h"
#include "host_blocks.h"

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

// Before main, so that no kernel allocates through Halide's default
// allocator first; run_halide installs it too (once) for callers that run
// during static initialisation.
const bool host_block_cache_installed = (install_host_block_cache(), true);

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

Status status_from_halide(const char *op, int error_code, const std::string &error_text, Device device) {
    if (error_code == halide_error_code_success) return Status::success();
    std::string message = std::string(op) + ": kernel failed (Halide error " + std::to_string(error_code) + ")";
    if (!error_text.empty()) message += ": " + one_line(error_text);
    if (error_code == halide_error_code_out_of_memory) return {StatusCode::out_of_memory, message};
    // An intermediate larger than one Halide allocation can be (2^31-1 bytes;
    // capsconv's padded input at a large pad or stride): the arguments are
    // valid but need more memory than the kernel can allocate.
    if (error_code == halide_error_code_buffer_allocation_too_large ||
        error_code == halide_error_code_buffer_extents_too_large) {
        return {StatusCode::out_of_memory, message};
    }
    // A schedule that handles only some shapes says so with specialize_fail
    // (capsconv's staged_rows: tiles past the launch's shared memory).
    if (error_code == halide_error_code_specialize_fail) return {StatusCode::unsupported_shape, message};
    // A kernel that declares a buffer's start aligned (predict's batch_walk:
    // u_hat, 8 bytes) checks a host pointer before any work; Halide's message
    // names the buffer.
    if (error_code == halide_error_code_unaligned_host_ptr) return {StatusCode::misaligned_pointer, message};
    if (is_device_error(error_code)) {
        return {device == Device::opencl ? StatusCode::opencl_error : StatusCode::cuda_error, message};
    }
    return {StatusCode::internal_error, message};
}

std::string halide_argv(const halide_filter_metadata_t &metadata, void **user_context,
                        const std::vector<int32_t> &scalars, const std::vector<halide_buffer_t *> &buffers,
                        size_t input_count, std::vector<void *> *args) {
    args->clear();
    size_t next_scalar = 0, next_buffer = 0, inputs = 0, outputs = 0;
    for (int n = 0; n < metadata.num_arguments; n++) {
        const halide_filter_argument_t &arg = metadata.arguments[n];
        const std::string name = arg.name;
        if (name == "__user_context") {
            args->push_back(user_context);
            continue;
        }
        if (arg.kind == halide_argument_kind_input_scalar) {
            if (arg.type.code != halide_type_int || arg.type.bits != 32) return "scalar " + name + " is not int32";
            if (next_scalar == scalars.size()) {
                return "takes more than the " + std::to_string(scalars.size()) + " scalars given";
            }
            args->push_back(const_cast<int32_t *>(&scalars[next_scalar++]));
            continue;
        }
        const bool is_input = arg.kind == halide_argument_kind_input_buffer;
        (is_input ? inputs : outputs)++;
        if (next_buffer == buffers.size()) {
            return "takes more than the " + std::to_string(buffers.size()) + " buffers given";
        }
        if (is_input != (next_buffer < input_count)) {
            return "buffer " + name + " is an " + (is_input ? "input" : "output") + " where an " +
                   (is_input ? "output" : "input") + " is given";
        }
        halide_buffer_t *buffer = buffers[next_buffer++];
        if (arg.type.code != halide_type_float || arg.type.bits != 32) return "buffer " + name + " is not float32";
        if (arg.dimensions != buffer->dimensions) {
            return "buffer " + name + " has rank " + std::to_string(arg.dimensions) + ", given rank " +
                   std::to_string(buffer->dimensions);
        }
        args->push_back(buffer);
    }
    if (next_scalar != scalars.size() || next_buffer != buffers.size()) {
        return "takes " + std::to_string(next_scalar) + " scalars and " + std::to_string(inputs) + " + " +
               std::to_string(outputs) + " buffers, given " + std::to_string(scalars.size()) + " and " +
               std::to_string(input_count) + " + " + std::to_string(buffers.size() - input_count);
    }
    return "";
}

bool on_16_byte_boundary(const TensorView &t) { return reinterpret_cast<std::uintptr_t>(t.data) % 16 == 0; }

Status run_halide(const char *op, const HalideFunction &kernel, Device device, const Options &options,
                  const std::vector<TensorView> &inputs, const std::vector<TensorView> &outputs,
                  const std::vector<int32_t> &scalars, const std::vector<const char *> &names) {
    install_error_handler();
    install_host_block_cache();
    if (names.size() != inputs.size() + outputs.size()) {
        return {StatusCode::internal_error, std::string(op) + ": " + std::to_string(names.size()) +
                                                " tensor names for " + std::to_string(inputs.size() + outputs.size()) +
                                                " tensors"};
    }
    for (size_t n = 0; n < names.size(); n++) {
        const TensorView &view = n < inputs.size() ? inputs[n] : outputs[n - inputs.size()];
        if (view.space == MemorySpace::cuda && !on_16_byte_boundary(view)) {
            return {StatusCode::misaligned_pointer,
                    std::string(op) + ": " + names[n] +
                        " is in cuda memory at an address that is not 16-byte aligned; the Halide "
                        "implementations need CUDA tensors that start on a 16-byte boundary"};
        }
    }
    CallContext call;
    std::vector<HalideTensor> tensors;
    tensors.reserve(inputs.size() + outputs.size());
    for (const auto &t : inputs) tensors.emplace_back(t);
    for (const auto &t : outputs) tensors.emplace_back(t);
    std::vector<halide_buffer_t *> raw;
    for (auto &t : tensors) raw.push_back(t.raw());
    void *user_context = &call;
    std::vector<void *> args;
    if (std::string why = halide_argv(*kernel.metadata(), &user_context, scalars, raw, inputs.size(), &args);
        !why.empty()) {
        return {StatusCode::internal_error,
                std::string(op) + ": kernel " + kernel.metadata()->name + " " + why + " (a runtime bug)"};
    }

    if (device == Device::cpu) {
        int code = kernel.argv(args.data());
        return status_from_halide(op, code, call.error_text);
    }

    if (device == Device::cuda) {
        if (Status s = resolve_cuda_context(options, &call.cuda_context); !s.ok()) {
            return {s.code, std::string(op) + ": " + s.message};
        }
        call.cuda_stream = options.cuda_stream;
    }

    // Each tensor by its own memory space: device tensors are wrapped, host
    // inputs marked for Halide to copy to the device, host outputs copied back.
    int code = halide_error_code_success;
    for (size_t n = 0; n < tensors.size(); n++) {
        const bool is_input = n < inputs.size();
        if (tensors[n].view().space == MemorySpace::cuda) {
            if (code == halide_error_code_success) code = wrap_device_pointer(&call, raw[n], tensors[n].view().data);
            if (is_input) raw[n]->set_device_dirty(true);
        } else if (is_input) {
            raw[n]->set_host_dirty(true);
        }
    }
    if (code == halide_error_code_success) code = kernel.argv(args.data());
    for (size_t n = inputs.size(); n < tensors.size(); n++) {
        if (code == halide_error_code_success && tensors[n].view().space == MemorySpace::host) {
            code = halide_copy_to_host(&call, raw[n]);
        }
    }
    // Let go of device memory: detach what the caller owns, free what Halide
    // allocated for host tensors. Keep the first error.
    for (size_t n = 0; n < tensors.size(); n++) {
        if (raw[n]->device == 0) continue;
        int release = tensors[n].view().space == MemorySpace::cuda ? detach_device_pointer(&call, raw[n])
                                                                   : halide_device_free(&call, raw[n]);
        if (code == halide_error_code_success) code = release;
    }
    return status_from_halide(op, code, call.error_text, device);
}

}  // namespace halcaps::detail

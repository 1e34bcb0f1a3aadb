// The tables of capsconv and capsconv_backward (implementation_table.h says
// how a call walks them). Measured times: H200, device time, unless said.
#include "halide_call.h"
#include "hand_cuda.h"
#include "implementations.h"
#include "kernel_registry.h"

namespace halcaps::detail {

namespace {

const std::vector<Device> kGpuDevices = {Device::cuda, Device::opencl};

// The Winograd forms (generators/capsconv_winograd.cpp, generator
// capsconv_<form>) compute 3x3 filters at stride 1 only (any pad); their
// implementations are named "<form>_<schedule>", e.g. "winograd4x4_staged".
const char *const kWinogradForms[] = {"winograd2x2", "winograd4x4"};

Status winograd_check(const CapsConvCall &c) {
    if (c.kernel_h == 3 && c.kernel_w == 3 && c.params.stride == 1) return Status::success();
    return {StatusCode::unsupported_shape, "computes 3x3 filters at stride 1 only; filter is " +
                                               std::to_string(c.kernel_h) + "x" + std::to_string(c.kernel_w) +
                                               ", stride " + std::to_string(c.params.stride)};
}

bool co_multiple_of_4(const CapsConvCall &c) { return c.out_caps % 4 == 0; }

// A forward row of `name` on `device`, where built: a direct schedule of
// generator capsconv, or a Winograd one ("<form>_<schedule>").
void add_forward(ImplementationTable<CapsConvCall> &table, const std::string &name, Device device,
                 const std::string &default_when = "", std::function<bool(const CapsConvCall &)> is_default = nullptr) {
    if (find_row(table, name, device) != nullptr) return;
    Implementation<CapsConvCall> row;
    row.name = name;
    row.device = device;
    row.default_when = default_when;
    row.is_default = std::move(is_default);
    if (const HalideKernelEntry *kernel = find_halide_kernel("capsconv", name, device)) {
        row.description = "Halide schedule '" + name + "' (4x4-pose capsule convolution)";
        row.run = [kernel](const CapsConvCall &c) {
            return run_halide(c.op, kernel->function, c.device, *c.options, {*c.input, *c.filter}, {*c.output},
                              c.direct_scalars, {"input", "filter", "output"});
        };
        table.push_back(std::move(row));
        return;
    }
    for (const char *form : kWinogradForms) {
        const std::string prefix = std::string(form) + "_";
        if (name.compare(0, prefix.size(), prefix) != 0) continue;
        const std::string schedule = name.substr(prefix.size());
        const HalideKernelEntry *kernel = find_halide_kernel(std::string("capsconv_") + form, schedule, device);
        if (kernel == nullptr) return;
        row.description =
            "Halide schedule '" + schedule + "' of the Winograd form " + form + " (3x3 filters, stride 1 only)";
        row.check = winograd_check;
        row.run = [kernel](const CapsConvCall &c) {
            return run_halide(c.op, kernel->function, c.device, *c.options, {*c.input, *c.filter}, {*c.output},
                              {c.params.pad}, {"input", "filter", "output"});
        };
        table.push_back(std::move(row));
        return;
    }
}

// A backward row of `schedule` on `device`, where both gradients' kernels are built.
void add_backward(ImplementationTable<CapsConvCall> &table, const std::string &schedule, Device device,
                  const std::string &default_when = "") {
    const HalideKernelEntry *input = find_halide_kernel("capsconv_grad_input", schedule, device);
    const HalideKernelEntry *filter = find_halide_kernel("capsconv_grad_filter", schedule, device);
    if (input == nullptr || filter == nullptr || find_row(table, schedule, device) != nullptr) return;
    Implementation<CapsConvCall> row;
    row.name = schedule;
    row.device = device;
    row.description = "Halide schedules '" + schedule + "' (grad_input, grad_filter)";
    row.default_when = default_when;
    row.run = [input, filter](const CapsConvCall &c) {
        if (Status s = run_halide(c.op, input->function, c.device, *c.options, {*c.grad_output, *c.filter},
                                  {*c.grad_input}, c.direct_scalars, {"grad_output", "filter", "grad_input"});
            !s.ok()) {
            return s;
        }
        return run_halide(c.op, filter->function, c.device, *c.options, {*c.grad_output, *c.input}, {*c.grad_filter},
                          c.direct_scalars, {"grad_output", "input", "grad_filter"});
    };
    table.push_back(std::move(row));
}

}  // namespace

const ImplementationTable<CapsConvCall> &capsconv_implementations() {
    static const ImplementationTable<CapsConvCall> table = [] {
        ImplementationTable<CapsConvCall> t;
        // The defaults, in order. Layer: n=8, 32x32, ci=co=32, pad 1.
        for (Device d : kGpuDevices) {
            // F(4x4, 3x3): the layer in 207 us against tuned_co4's 698 and cuDNN's 324 with its
            // permutes (docs/history.md: nvidia-h200-winograd/); relative L2 error 1.6e-6
            // against the direct sum's 6e-7 there, within the same tolerance.
            add_forward(t, "winograd4x4_staged", d, "3x3 filters at stride 1",
                        [](const CapsConvCall &c) { return winograd_check(c).ok(); });
            // The seed problem in 28.3 us against tuned's 40.3, the stride-2 layer in 109.8 against
            // tuned_co4's 181.9 (docs/history.md: nvidia-h200-staged-rows/capsconv.txt); its staged
            // tiles grow with stride and filter: past a launch's 48 KB it refuses the shape
            // (unsupported_shape) and the call goes on.
            add_forward(t, "staged_rows", d, "always, where its tiles fit in 48 KB of shared memory");
            // 4 output capsule types a thread: the layer in 699 us against tuned's 1489, the stride-2
            // layer 180 against 203, but the seed problem (co = 1) 57 against 35.
            add_forward(t, "tuned_co4", d, "co a multiple of 4", co_multiple_of_4);
            add_forward(t, "tuned", d, "always");
        }
        // CPU: 4 output capsule types at a time, 1.8x faster than cpu on the layer, but a whole
        // block computed past the last type, so only where co is a multiple of 4. (The Winograd
        // forms are slower here: 35 and 58 ms against cpu_co4's 26 on the layer.)
        add_forward(t, "cpu_co4", Device::cpu, "co a multiple of 4", co_multiple_of_4);
        add_forward(t, "cpu", Device::cpu, "always");
        // Every other schedule built (schedules/kernels.cmake), by name only.
        for (const auto &k : halide_kernels()) {
            const std::string generator = k.generator;
            if (generator == "capsconv") add_forward(t, k.schedule, k.device);
            for (const char *form : kWinogradForms) {
                if (generator == std::string("capsconv_") + form) {
                    add_forward(t, std::string(form) + "_" + k.schedule, k.device);
                }
            }
        }
        for (const auto &h : hand_cuda_implementations()) {
            if (h.op != "capsconv") continue;
            Implementation<CapsConvCall> row;
            row.name = h.implementation;
            row.device = Device::cuda;
            row.family = h.family;
            row.description = h.description;
            row.run = [name = h.implementation](const CapsConvCall &c) {
                return run_hand_cuda_capsconv(name, *c.input, *c.filter, *c.output, c.params, *c.options);
            };
            t.push_back(std::move(row));
        }
        return t;
    }();
    return table;
}

const ImplementationTable<CapsConvCall> &capsconv_backward_implementations() {
    static const ImplementationTable<CapsConvCall> table = [] {
        ImplementationTable<CapsConvCall> t;
        // tuned_caps' grad_filter walks the capsule types across a warp: both gradients of the
        // layer in 2521 us against tuned's 11612 (schedules/capsconv_schedules.cpp).
        for (Device d : kGpuDevices) add_backward(t, "tuned_caps", d, "always");
        add_backward(t, "cpu", Device::cpu, "always");
        for (const auto &k : halide_kernels()) {
            if (std::string(k.generator) == "capsconv_grad_input") add_backward(t, k.schedule, k.device);
        }
        return t;
    }();
    return table;
}

}  // namespace halcaps::detail

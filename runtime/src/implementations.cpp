// list_implementations() and the default queries, read from the operators'
// tables (implementations.h).
#include "implementations.h"

#include <algorithm>

namespace halcaps {

namespace detail {

const char *family_name(Family family) {
    switch (family) {
    case Family::halide:
        return "halide";
    case Family::hand_written:
        return "hand_written";
    case Family::library:
        return "library";
    }
    return "unknown";
}

Status check_iteration_count(const std::vector<int> &counts, int iterations) {
    if (std::find(counts.begin(), counts.end(), iterations) != counts.end()) return Status::success();
    std::string list;
    for (int n : counts) list += (list.empty() ? "" : ", ") + std::to_string(n);
    return {StatusCode::unsupported_iterations, "is built for iterations " + list + ", not " +
                                                    std::to_string(iterations) +
                                                    " (schedules/kernels.cmake lists the counts built)"};
}

}  // namespace detail

std::vector<ImplementationInfo> list_implementations() {
    std::vector<ImplementationInfo> out;
    detail::append_infos("predict", detail::predict_implementations(), out);
    detail::append_infos("predict_backward", detail::predict_backward_implementations(), out);
    for (const char *op : detail::routing_op_names()) {
        detail::append_infos(op, detail::routing_implementations(op), out);
    }
    detail::append_infos("capsconv", detail::capsconv_implementations(), out);
    detail::append_infos("capsconv_backward", detail::capsconv_backward_implementations(), out);
    return out;
}

std::string default_implementation(const std::string &op, Device device, int iterations) {
    // The list is in table order, so each device's default rows by rank.
    for (const auto &info : list_implementations()) {
        if (info.op != op || info.device != device || info.default_rank == 0) continue;
        if (iterations == 0 || info.iterations.empty() ||
            std::find(info.iterations.begin(), info.iterations.end(), iterations) != info.iterations.end()) {
            return info.implementation;
        }
    }
    return "";
}

std::string default_implementation(Device device) {
    return device == Device::cuda || device == Device::opencl ? "tuned" : "cpu";
}

}  // namespace halcaps

// One table per operator: every implementation the runtime can run, with
// what picks it. The tables themselves are in
// runtime/src/predict_implementations.cpp, routing_implementations.cpp
// and capsconv_implementations.cpp; this is the mechanism they share.
//
// A call names an implementation, or none. A named one runs where its row
// applies to the arguments (its iteration counts, its check), and otherwise
// returns the row's code and reason. With none named the default is the
// first row, in table order, that is a default row for the arguments
// (is_default), applies, and does not refuse the shape when run
// (unsupported_shape, which a kernel reports before any work): the walk
// goes on to the next such row, so a default not built for an iteration
// count falls through to the next one, finally to the hand-written kernels.
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "halcaps/halcaps.h"

namespace halcaps::detail {

enum class Family {
    halide,        // an ahead-of-time compiled Halide kernel (the registry)
    hand_written,  // hand-written CUDA (reference/cuda/)
    library,       // a vendor library (cuBLAS, cuDNN)
};
const char *family_name(Family family);

// What every operator's call carries besides its tensors.
struct CallSite {
    const char *op = "";
    Device device = Device::cpu;  // resolved (never automatic)
    int iterations = 0;           // routing ops; 0 for the others
    const Options *options = nullptr;
};

template <typename Call>
struct Implementation {
    std::string name;
    Device device = Device::cpu;
    Family family = Family::halide;
    std::string description;
    // Routing ops: the iteration counts it runs (a Halide kernel's: the counts
    // built, schedules/kernels.cmake); empty for ops without a count.
    std::vector<int> iterations;
    // A default row says where it is the default (for list_implementations
    // and `halcaps info`); a row with none runs only by name.
    std::string default_when;
    std::function<bool(const Call &)> is_default;  // null: wherever it applies
    // ok where the row applies to the arguments, else the code and the
    // reason, which completes "<op>: implementation '<name>' ..."; null:
    // any arguments (past the iteration counts).
    std::function<Status(const Call &)> check;
    std::function<Status(const Call &)> run;
};

template <typename Call>
using ImplementationTable = std::vector<Implementation<Call>>;

// The rows' shared iteration check: ok, or unsupported_iterations listing the counts.
Status check_iteration_count(const std::vector<int> &counts, int iterations);

// The row of `name` on `device`, or null.
template <typename Call>
const Implementation<Call> *find_row(const ImplementationTable<Call> &table, const std::string &name, Device device) {
    for (const auto &row : table) {
        if (row.name == name && row.device == device) return &row;
    }
    return nullptr;
}

template <typename Call>
Status row_applies(const Implementation<Call> &row, const Call &call) {
    Status s = call.iterations > 0 ? check_iteration_count(row.iterations, call.iterations) : Status::success();
    if (s.ok() && row.check) s = row.check(call);
    if (s.ok()) return s;
    return {s.code, std::string(call.op) + ": implementation '" + row.name + "' " + s.message};
}

// The names of the table's rows on `device`, in table order, for messages;
// where there are none, those on the other devices.
template <typename Call>
std::string row_names(const ImplementationTable<Call> &table, Device device) {
    std::string out, elsewhere;
    for (const auto &row : table) {
        if (row.device == device) out += (out.empty() ? "" : ", ") + row.name;
        if (row.device != device) {
            elsewhere += (elsewhere.empty() ? "" : ", ") + row.name + " (" + device_name(row.device) + ")";
        }
    }
    if (!out.empty()) return out;
    return elsewhere.empty() ? "none" : "none; on other devices: " + elsewhere;
}

// Runs call.options->implementation, or the default (see the top).
template <typename Call>
Status run_implementation(const ImplementationTable<Call> &table, const Call &call) {
    const std::string &name = call.options->implementation;
    if (!name.empty()) {
        const Implementation<Call> *row = find_row(table, name, call.device);
        if (row == nullptr) {
            return {StatusCode::unknown_implementation, std::string(call.op) + ": no implementation named '" + name +
                                                            "' for device " + device_name(call.device) +
                                                            "; available: " + row_names(table, call.device)};
        }
        if (Status s = row_applies(*row, call); !s.ok()) return s;
        return row->run(call);
    }
    Status last{StatusCode::unknown_implementation, std::string(call.op) + ": no implementation for device " +
                                                        device_name(call.device) +
                                                        "; available: " + row_names(table, call.device)};
    for (const auto &row : table) {
        if (row.device != call.device || row.default_when.empty()) continue;
        if (row.is_default && !row.is_default(call)) continue;
        if (Status s = row_applies(row, call); !s.ok()) {
            last = s;
            continue;
        }
        Status s = row.run(call);
        if (s.code != StatusCode::unsupported_shape) return s;
        last = s;
    }
    return last;
}

// The table's rows as list_implementations() entries.
template <typename Call>
void append_infos(const char *op, const ImplementationTable<Call> &table, std::vector<ImplementationInfo> &out) {
    int rank[4] = {0, 0, 0, 0};  // per Device
    for (const auto &row : table) {
        ImplementationInfo info{
            op, row.name, row.device, row.description, row.iterations, 0, row.default_when, family_name(row.family)};
        if (!row.default_when.empty()) info.default_rank = ++rank[static_cast<int>(row.device)];
        out.push_back(info);
    }
}

}  // namespace halcaps::detail

// The subcommands of the `halcaps` tool; each registers itself on the app.
#pragma once

#include <CLI/CLI.hpp>

namespace halcaps::cli {

// `halcaps predict`: capsule prediction forward (and --backward), checked and timed.
void add_predict_command(CLI::App &app);
// `halcaps info`: the build, the device and every implementation.
void add_info_command(CLI::App &app);

}  // namespace halcaps::cli

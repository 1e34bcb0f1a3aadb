// The subcommands of the `halcaps` tool; each registers itself on the app.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace halcaps::cli {

// `halcaps predict`: capsule prediction forward (and --backward), checked and timed.
void add_predict_command(CLI::App &app);
// `halcaps digitcaps` and `halcaps route`: the DigitCaps layer and routing
// (and with --backward their gradients), checked and timed on the CPU.
void add_digitcaps_commands(CLI::App &app);
// `halcaps capsconv`: the 4x4-pose capsule convolution (and --backward its
// gradients), checked and timed on the CPU against the naive OpenMP loops.
void add_capsconv_command(CLI::App &app);
// `halcaps bench`: every implementation side by side on standard shapes;
// `command_line` is recorded in the JSON and Markdown it writes.
void add_bench_command(CLI::App &app, const std::string &command_line);
// `halcaps explore build|run`: compile, check and time the points of a
// schedule space (schedules/spaces/).
void add_explore_command(CLI::App &app);
// `halcaps info`: the build, the device and every implementation.
void add_info_command(CLI::App &app);

}  // namespace halcaps::cli

// halcaps: run capsule-network operators on random data or .npy files, check
// them against the float64 reference and time them.
#include <cstdio>
#include <exception>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"

int main(int argc, char **argv) {
    CLI::App app{"halcaps: capsule-network operators compiled ahead of time with Halide.\n"
                 "Every run is checked against a float64 reference before it is timed."};
    app.require_subcommand(1);
    halcaps::cli::add_info_command(app);
    halcaps::cli::add_predict_command(app);
    halcaps::cli::add_digitcaps_commands(app);
    halcaps::cli::add_explore_command(app);
    halcaps::cli::add_capsconv_command(app);
    std::string command_line = "halcaps";
    for (int n = 1; n < argc; n++) command_line += std::string(" ") + argv[n];
    halcaps::cli::add_bench_command(app, command_line);
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp &e) {
        return app.exit(e);  // prints the help of the (sub)command asked about
    } catch (const CLI::CallForAllHelp &e) {
        return app.exit(e);
    } catch (const CLI::ParseError &e) {
        // One line, whatever CLI11 would have said, then a non-zero exit.
        std::fprintf(stderr, "halcaps: error: %s (run with --help for usage)\n", e.what());
        return 2;
    } catch (const halcaps::cli::UsageError &e) {
        std::fprintf(stderr, "halcaps: error: %s\n", e.message.c_str());
        return 1;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "halcaps: error: %s\n", e.what());
        return 1;
    }
    return 0;
}

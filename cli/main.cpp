// halcaps: run capsule-network operators on random data or .npy files, check
// them against the float64 reference and time them.
#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"

namespace {

// The subcommand names of `app`, comma-separated.
std::string subcommand_names(const CLI::App &app) {
    std::string names;
    for (const CLI::App *sub : app.get_subcommands([](const CLI::App *) { return true; })) {
        names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    return names;
}

// Walks the leading words of the command line down the subcommand tree
// (`halcaps explore run ...`); the first word that names no subcommand of
// one that has some is an error naming the word and the valid ones (CLI11
// alone says only "A subcommand is required"). Returns an empty string
// when the words are fine.
std::string unknown_subcommand(const CLI::App &app, int argc, char **argv) {
    const CLI::App *current = &app;
    for (int n = 1; n < argc; n++) {
        const std::string word = argv[n];
        if (word.empty() || word[0] == '-') break;  // an option: CLI11 checks the rest
        const auto subs = current->get_subcommands([](const CLI::App *) { return true; });
        if (subs.empty()) break;
        const CLI::App *next = nullptr;
        for (const CLI::App *sub : subs) {
            if (sub->check_name(word)) next = sub;
        }
        if (next == nullptr) {
            const std::string where = current == &app ? "halcaps" : "halcaps " + current->get_name();
            return "unknown subcommand '" + word + "' of " + where +
                   "; valid subcommands: " + subcommand_names(*current);
        }
        current = next;
    }
    return "";
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{
        "halcaps: capsule-network operators compiled ahead of time with Halide.\n"
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
    if (const std::string unknown = unknown_subcommand(app, argc, argv); !unknown.empty()) {
        std::fprintf(stderr, "halcaps: error: %s (run with --help for usage)\n", unknown.c_str());
        return 2;
    }
    if (argc < 2) {
        std::fprintf(stderr, "halcaps: error: a subcommand is required: one of %s (run with --help for usage)\n",
                     subcommand_names(app).c_str());
        return 2;
    }
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
    } catch (const std::bad_alloc &) {
        // The commands check each tensor's size before allocating it; this is
        // some other allocation (the float64 reference's, a library call's).
        std::fprintf(stderr, "halcaps: error: out of host memory (an allocation failed; try smaller extents)\n");
        return 1;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "halcaps: error: %s\n", e.what());
        return 1;
    }
    return 0;
}

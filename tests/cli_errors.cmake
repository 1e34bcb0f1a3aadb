# Bad flags and files: a non-zero exit and exactly one line on stderr that
# starts with "halcaps: error:", never a crash.
# One case per entry, its arguments separated by spaces.
set(cases
    "predict --no-such-flag"
    "predict --batch -4"
    "predict --device gpu"
    "predict --repeats 0"
    "predict --u /nonexistent.npy --W /nonexistent.npy"
    "predict --u ${CMAKE_CURRENT_LIST_FILE}"
    "predict --schedule no-such-schedule --device cpu -B 2 -I 2 -K 2 -J 2 -E 2"
    "bench --device cpu --op predict --shapes 2:2:2:2:2 --implementations no-such-implementation"
    "bench --device cpu --op capsconv --implementations naive"
    "bench --device cpu --op route --shapes 2:2:2:2:2 --implementations auto_li2018"
    "no-such-command")
foreach (case IN LISTS cases)
    separate_arguments(arguments UNIX_COMMAND "${case}")
    execute_process(COMMAND "${CLI}" ${arguments} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if (result EQUAL 0 OR NOT result MATCHES "^[0-9]+$")
        message(FATAL_ERROR "'${case}': expected a non-zero exit code, got '${result}'")
    endif ()
    if (NOT err MATCHES "^halcaps: error: [^\n]+\n$")
        message(FATAL_ERROR "'${case}': expected one 'halcaps: error:' line on stderr, got '${err}'")
    endif ()
    message(STATUS "'${case}' -> exit ${result}: ${err}")
endforeach ()

# Errors whose message must say what was wrong: each entry is the arguments,
# then '|', then a regular expression the one stderr line must match (with
# '.' for a ';', which would split the list). Small
# shapes, so that a check that wrongly let a case through would still end
# quickly.
set(small_route "-B 2 -I 3 -J 2 -E 3 --repeats 1 --warmup 0")
set(small_layer "-B 2 -I 3 -K 2 -J 2 -E 3 --repeats 1 --warmup 0")
set(expected
    # The library refuses the iteration count before the float64 reference runs.
    "route ${small_route} -r 0|--iterations 0: unsupported_iterations: route: "
    "route ${small_route} -r -1|--iterations -1: unsupported_iterations: route: "
    "route ${small_route} -r 0 --schedule all|--iterations 0: unsupported_iterations: "
    "route ${small_route} -r -2147483648 --backward|--iterations -2147483648: unsupported_iterations: "
    "digitcaps ${small_layer} -r 0|--iterations 0: unsupported_iterations: digitcaps: "
    "digitcaps ${small_layer} -r -3|--iterations -3: unsupported_iterations: digitcaps: "
    "digitcaps ${small_layer} -r -3 --schedule cpu --backward|--iterations -3: unsupported_iterations: "
    # Options that were silently ignored.
    "capsconv -k 0|--kernel/-k is 0. it must be at least 1"
    "capsconv -k -3|--kernel/-k is -3. it must be at least 1"
    "capsconv -k 3 --kh 5|--kernel.* excludes --kh|--kh excludes --kernel"
    "capsconv --kh 0|--kh is 0. it must be positive"
    "capsconv --stride 0|--stride is 0"
    "capsconv --stride 4294967297|--stride is 4294967297. it must be from 1 to 2147483647"
    "capsconv --pad -1|--pad is -1"
    "capsconv -H 3 -W 3 -k 5|the filter \\(5x5\\) is larger than the padded input \\(3x3\\)"
    "predict --g ${CMAKE_CURRENT_LIST_FILE}|--g requires --backward"
    "predict --out-grad-u /tmp/never-written.npy|--out-grad-u requires --backward"
    "predict --out-grad-W /tmp/never-written.npy|--out-grad-W requires --backward"
    "route --out-grad-u-hat /tmp/never-written.npy|--out-grad-u-hat requires --backward"
    "route --out-grad-b0 /tmp/never-written.npy|--out-grad-b0 requires --backward"
    "route --grad-v ${CMAKE_CURRENT_LIST_FILE}|--grad-v requires --backward"
    "digitcaps --out-grad-u /tmp/never-written.npy|--out-grad-u requires --backward"
    "digitcaps --out-grad-W /tmp/never-written.npy|--out-grad-W requires --backward"
    "capsconv --out-grad-input /tmp/never-written.npy|--out-grad-input requires --backward"
    "capsconv --out-grad-filter /tmp/never-written.npy|--out-grad-filter requires --backward"
    "capsconv --grad-output ${CMAKE_CURRENT_LIST_FILE}|--grad-output requires --backward"
    "route --b0 --b0-file ${CMAKE_CURRENT_LIST_FILE}|--b0.* excludes --b0"
    "digitcaps --b0-file ${CMAKE_CURRENT_LIST_FILE} --b0|--b0.* excludes --b0"
    # Extents too large: what, its extents, and the bytes asked; never std::bad_alloc.
    "predict -B 1000000000|u \\[batch, in_caps, in_dim\\] = \\[1000000000, 1152, 8\\] has 9216000000000 elements, 36864000000000 bytes \\(36.9 TB\\): more than the 2\\^31-1"
    "predict -B 9223372036854775807 -I 9223372036854775807|u \\[batch, in_caps, in_dim\\] = \\[9223372036854775807, 9223372036854775807, 8\\] has [0-9.e+]+ elements"
    "route -B 100000 -I 100000|u_hat \\[batch, in_caps, out_caps, out_dim\\] = \\[100000, 100000, 10, 16\\] has 1600000000000 elements, 6400000000000 bytes"
    "digitcaps -I 100000 -J 100000|W \\[in_caps, out_caps, out_dim, in_dim\\] = \\[100000, 100000, 16, 8\\] has"
    "capsconv -H 100000 -W 100000 --in-caps 100|input \\[n, H, W, ci, 4, 4\\] = \\[1, 100000, 100000, 100, 4, 4\\] has 16000000000000 elements"
    "bench --device cpu --op digitcaps --shapes 100000:100000:8:10:16 --repeats 1|u = \\[100000, 100000, 8\\] has 80000000000 elements, 320000000000 bytes"
    "predict -B 0|--batch is 0. it must be positive"
    "digitcaps -K -2|--in-dim is -2. it must be positive"
    # An unknown subcommand is named, with the valid ones.
    "no-such-command|unknown subcommand 'no-such-command' of halcaps. valid subcommands: info, predict, digitcaps, route, explore, capsconv, bench"
    "explore no-such-step|unknown subcommand 'no-such-step' of halcaps explore. valid subcommands: build, run"
    "|a subcommand is required: one of info, predict")
foreach (entry IN LISTS expected)
    string(FIND "${entry}" "|" bar)
    string(SUBSTRING "${entry}" 0 ${bar} case)
    math(EXPR after "${bar} + 1")
    string(SUBSTRING "${entry}" ${after} -1 pattern)
    separate_arguments(arguments UNIX_COMMAND "${case}")
    execute_process(COMMAND "${CLI}" ${arguments} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err
                    TIMEOUT 60)
    if (result EQUAL 0 OR NOT result MATCHES "^[0-9]+$")
        message(FATAL_ERROR "'${case}': expected a non-zero exit code, got '${result}' (stderr '${err}')")
    endif ()
    if (NOT err MATCHES "^halcaps: error: [^\n]+\n$")
        message(FATAL_ERROR "'${case}': expected one 'halcaps: error:' line on stderr, got '${err}'")
    endif ()
    if (NOT err MATCHES "${pattern}")
        message(FATAL_ERROR "'${case}': expected stderr to match '${pattern}', got '${err}'")
    endif ()
    message(STATUS "'${case}' -> exit ${result}: ${err}")
endforeach ()

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

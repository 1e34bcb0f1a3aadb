# The CLI reads back the inputs it saved and reproduces its output bit for bit.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
execute_process(COMMAND "${CLI}" predict -B 3 -I 5 -K 4 -J 2 -E 7 --device cpu --repeats 1
                        --save-inputs "${WORK_DIR}/in_" --out "${WORK_DIR}/first.npy" RESULT_VARIABLE r1)
execute_process(COMMAND "${CLI}" predict --u "${WORK_DIR}/in_u.npy" --W "${WORK_DIR}/in_W.npy" --device cpu
                        --repeats 1 --out "${WORK_DIR}/second.npy" RESULT_VARIABLE r2)
if (NOT r1 EQUAL 0 OR NOT r2 EQUAL 0)
    message(FATAL_ERROR "CLI runs failed: ${r1}, ${r2}")
endif ()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${WORK_DIR}/first.npy" "${WORK_DIR}/second.npy"
                RESULT_VARIABLE same)
if (NOT same EQUAL 0)
    message(FATAL_ERROR "u_hat from the saved inputs differs from the first run")
endif ()
# A malformed file is a one-line error and a non-zero exit.
file(WRITE "${WORK_DIR}/bad.npy" "not a numpy file")
execute_process(COMMAND "${CLI}" predict --u "${WORK_DIR}/bad.npy" --W "${WORK_DIR}/in_W.npy" --device cpu
                RESULT_VARIABLE r3 OUTPUT_VARIABLE out ERROR_VARIABLE err)
if (r3 EQUAL 0 OR NOT err MATCHES "^halcaps: error: [^\n]*bad.npy[^\n]*\n$")
    message(FATAL_ERROR "malformed .npy: exit ${r3}, stderr '${err}'")
endif ()

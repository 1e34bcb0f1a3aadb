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

# run(<name> args...): runs the CLI, which must exit 0 (its own check against
# the float64 reference passed).
function(run name)
    execute_process(COMMAND "${CLI}" ${ARGN} RESULT_VARIABLE r OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if (NOT r EQUAL 0)
        message(FATAL_ERROR "${name}: exit ${r}\n${out}\n${err}")
    endif ()
endfunction()
# same(<first> <second>): the two files are identical byte for byte.
function(same first second)
    execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${WORK_DIR}/${first}" "${WORK_DIR}/${second}"
                    RESULT_VARIABLE r)
    if (NOT r EQUAL 0)
        message(FATAL_ERROR "${second} differs from ${first}")
    endif ()
endfunction()
# refused(<name> <regex> args...): a non-zero exit and one error line matching <regex>.
function(refused name pattern)
    execute_process(COMMAND "${CLI}" ${ARGN} RESULT_VARIABLE r OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
    if (r EQUAL 0 OR NOT r MATCHES "^[0-9]+$" OR NOT err MATCHES "^halcaps: error: [^\n]+\n$" OR NOT err MATCHES "${pattern}")
        message(FATAL_ERROR "${name}: expected a one-line error matching '${pattern}', got exit ${r}, stderr '${err}'")
    endif ()
    message(STATUS "${name}: ${err}")
endfunction()
set(quick --repeats 1 --warmup 0)

# Every operator's every input and output through .npy files: a random run
# saves its inputs and writes every output; a second run reads the inputs
# back and must write the same bytes.
run(predict_backward predict -B 3 -I 5 -K 4 -J 2 -E 7 --device cpu ${quick} --backward --save-inputs "${WORK_DIR}/pb_"
    --out "${WORK_DIR}/pb1_u_hat.npy" --out-grad-u "${WORK_DIR}/pb1_grad_u.npy" --out-grad-W "${WORK_DIR}/pb1_grad_W.npy")
run(predict_backward_again predict --u "${WORK_DIR}/pb_u.npy" --W "${WORK_DIR}/pb_W.npy" --g "${WORK_DIR}/pb_g.npy"
    --device cpu ${quick} --backward --out "${WORK_DIR}/pb2_u_hat.npy" --out-grad-u "${WORK_DIR}/pb2_grad_u.npy"
    --out-grad-W "${WORK_DIR}/pb2_grad_W.npy")
foreach (out IN ITEMS u_hat grad_u grad_W)
    same(pb1_${out}.npy pb2_${out}.npy)
endforeach ()

run(route route -B 3 -I 5 -J 2 -E 7 -r 3 --b0 --backward ${quick} --save-inputs "${WORK_DIR}/r_"
    --out "${WORK_DIR}/r1_v.npy" --out-grad-u-hat "${WORK_DIR}/r1_grad_u_hat.npy" --out-grad-b0 "${WORK_DIR}/r1_grad_b0.npy")
run(route_again route --u-hat "${WORK_DIR}/r_u_hat.npy" --b0-file "${WORK_DIR}/r_b0.npy" --grad-v "${WORK_DIR}/r_grad_v.npy"
    -r 3 --backward ${quick} --out "${WORK_DIR}/r2_v.npy" --out-grad-u-hat "${WORK_DIR}/r2_grad_u_hat.npy"
    --out-grad-b0 "${WORK_DIR}/r2_grad_b0.npy")
foreach (out IN ITEMS v grad_u_hat grad_b0)
    same(r1_${out}.npy r2_${out}.npy)
endforeach ()

run(digitcaps digitcaps -B 3 -I 5 -K 4 -J 2 -E 7 -r 3 --b0 --backward ${quick} --save-inputs "${WORK_DIR}/d_"
    --out "${WORK_DIR}/d1_v.npy" --out-grad-u "${WORK_DIR}/d1_grad_u.npy" --out-grad-W "${WORK_DIR}/d1_grad_W.npy"
    --out-grad-b0 "${WORK_DIR}/d1_grad_b0.npy")
run(digitcaps_again digitcaps --u "${WORK_DIR}/d_u.npy" --W "${WORK_DIR}/d_W.npy" --b0-file "${WORK_DIR}/d_b0.npy"
    --grad-v "${WORK_DIR}/d_grad_v.npy" -r 3 --backward ${quick} --out "${WORK_DIR}/d2_v.npy"
    --out-grad-u "${WORK_DIR}/d2_grad_u.npy" --out-grad-W "${WORK_DIR}/d2_grad_W.npy" --out-grad-b0 "${WORK_DIR}/d2_grad_b0.npy")
foreach (out IN ITEMS v grad_u grad_W grad_b0)
    same(d1_${out}.npy d2_${out}.npy)
endforeach ()

run(capsconv capsconv -n 2 -H 6 -W 5 --in-caps 2 --out-caps 3 -k 3 --stride 2 --pad 1 --backward ${quick}
    --save-inputs "${WORK_DIR}/c_" --out "${WORK_DIR}/c1_output.npy" --out-grad-input "${WORK_DIR}/c1_grad_input.npy"
    --out-grad-filter "${WORK_DIR}/c1_grad_filter.npy")
run(capsconv_again capsconv --input "${WORK_DIR}/c_input.npy" --filter "${WORK_DIR}/c_filter.npy"
    --grad-output "${WORK_DIR}/c_grad_output.npy" --stride 2 --pad 1 --backward ${quick}
    --out "${WORK_DIR}/c2_output.npy" --out-grad-input "${WORK_DIR}/c2_grad_input.npy"
    --out-grad-filter "${WORK_DIR}/c2_grad_filter.npy")
foreach (out IN ITEMS output grad_input grad_filter)
    same(c1_${out}.npy c2_${out}.npy)
endforeach ()

# Files that disagree with each other: extent_mismatch naming both files and
# both extents, never a read past a file's values. Small files to mix:
# W of shape (1, 1, 1, 1), and W with u's in_caps but another in_dim.
run(tiny predict -B 1 -I 1 -K 1 -J 1 -E 1 --device cpu ${quick} --save-inputs "${WORK_DIR}/tiny_")
run(other_in_dim predict -B 1 -I 5 -K 3 -J 2 -E 7 --device cpu ${quick} --save-inputs "${WORK_DIR}/k3_")
foreach (command IN ITEMS predict digitcaps)
    refused(${command}_W_in_caps
            "extent_mismatch: --W [^ ]*tiny_W.npy has in_caps = 1 \\(extent 0 of \\[1, 1, 1, 1\\]\\) but --u [^ ]*d_u.npy has in_caps = 5 \\(extent 1 of \\[3, 5, 4\\]\\)"
            ${command} --u "${WORK_DIR}/d_u.npy" --W "${WORK_DIR}/tiny_W.npy" ${quick})
    refused(${command}_W_in_dim
            "extent_mismatch: --W [^ ]*k3_W.npy has in_dim = 3 \\(extent 3 of \\[5, 2, 7, 3\\]\\) but --u [^ ]*d_u.npy has in_dim = 4 \\(extent 2 of \\[3, 5, 4\\]\\)"
            ${command} --u "${WORK_DIR}/d_u.npy" --W "${WORK_DIR}/k3_W.npy" ${quick})
    # A file's shape is the shape: the extent flags do not also apply.
    refused(${command}_file_and_flag "--u excludes --batch|--batch excludes --u"
            ${command} --u "${WORK_DIR}/d_u.npy" --W "${WORK_DIR}/d_W.npy" -B 7 ${quick})
endforeach ()
refused(predict_g_shape "extent_mismatch: --g [^ ]*d_W.npy has shape \\[5, 2, 7, 4\\] but g \\[batch, in_caps, out_caps, out_dim\\] must be \\[3, 5, 2, 7\\]"
        predict --u "${WORK_DIR}/d_u.npy" --W "${WORK_DIR}/pb_W.npy" --g "${WORK_DIR}/d_W.npy" --backward ${quick})
refused(route_b0_shape "extent_mismatch: --b0-file [^ ]*r_b0.npy has shape \\[5, 2\\] but b0 \\[in_caps, out_caps\\] must be \\[1, 1\\]"
        route --u-hat "${WORK_DIR}/tiny_W.npy" --b0-file "${WORK_DIR}/r_b0.npy" ${quick})
refused(route_grad_v_shape "extent_mismatch: --grad-v [^ ]*tiny_u.npy has shape \\[1, 1, 1\\] but grad_v \\[batch, out_caps, out_dim\\] must be \\[3, 2, 7\\]"
        route --u-hat "${WORK_DIR}/r_u_hat.npy" --grad-v "${WORK_DIR}/tiny_u.npy" --backward ${quick})
refused(capsconv_ci "extent_mismatch: --filter [^ ]*c_input.npy has ci = 5 \\(extent 2 of \\[2, 6, 5, 2, 4, 4\\]\\) but --input [^ ]*c_filter.npy has ci = 3 \\(extent 3 of \\[3, 3, 2, 3, 4, 4\\]\\)"
        capsconv --input "${WORK_DIR}/c_filter.npy" --filter "${WORK_DIR}/c_input.npy" ${quick})
refused(capsconv_rank "[^ ]*pb1_grad_W.npy: expected rank 6"
        capsconv --input "${WORK_DIR}/pb1_grad_W.npy" --filter "${WORK_DIR}/c_filter.npy" ${quick})
refused(capsconv_grad_output_shape "extent_mismatch: --grad-output [^ ]*c_input.npy has shape \\[2, 6, 5, 2, 4, 4\\] but grad_output \\[n, OH, OW, co, 4, 4\\] must be \\[2, 3, 3, 3, 4, 4\\]"
        capsconv --input "${WORK_DIR}/c_input.npy" --filter "${WORK_DIR}/c_filter.npy" --grad-output "${WORK_DIR}/c_input.npy"
        --stride 2 --pad 1 --backward ${quick})

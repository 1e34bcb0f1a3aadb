# `halcaps explore` end to end on a two-point CPU space and a tiny shape
# (build: two generator runs of about a second each; run: milliseconds), then
# malformed space files: each must fail before compiling anything, with a
# non-zero exit and exactly one "halcaps: error:" line naming the problem.
# Inputs: CLI, SOURCE_DIR (the repository), WORK_DIR.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

function(run_ok)
    execute_process(COMMAND "${CLI}" ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if (NOT result EQUAL 0)
        message(FATAL_ERROR "'${ARGN}' failed (${result}):\n${out}\n${err}")
    endif ()
    message(STATUS "${out}")
endfunction()

run_ok(explore build --space "${SOURCE_DIR}/tests/spaces/tiny_cpu.space" --out "${WORK_DIR}/tiny")
run_ok(explore run "${WORK_DIR}/tiny" --shape 3:7:5:4:9 --repeats 2 --warmup 1)
file(STRINGS "${WORK_DIR}/tiny/results.csv" rows)
list(LENGTH rows count)
if (NOT count EQUAL 3)
    message(FATAL_ERROR "results.csv: expected a header and 2 rows, got:\n${rows}")
endif ()
foreach (row IN LISTS rows)
    if (NOT row MATCHES "^point," AND NOT row MATCHES "^\"space:tile_i=(4|16)\",(4|16),[0-9.e+-]+,1,")
        message(FATAL_ERROR "results.csv: a point is missing or not valid: ${row}")
    endif ()
endforeach ()
file(READ "${WORK_DIR}/tiny/best.txt" best)
if (NOT best MATCHES "halcaps_add_kernel\\(predict  \"space:tile_i=(4|16)\"  cpu\\)")
    message(FATAL_ERROR "best.txt: no kernels.cmake line:\n${best}")
endif ()
foreach (file IN ITEMS points.json results.json)
    if (NOT EXISTS "${WORK_DIR}/tiny/${file}")
        message(FATAL_ERROR "missing ${file}")
    endif ()
endforeach ()

# A gradient operator (grad_u on the CPU, two points), with extra rows: the
# named schedule `cpu` and the operator scheduled by Mullapudi2016 (the
# cheapest autoscheduler to run); every row must be valid, and the rows
# that are not points have empty knob columns.
run_ok(explore build --space "${SOURCE_DIR}/tests/spaces/tiny_grad_cpu.space" --schedule cpu
       --autoscheduler Mullapudi2016 --out "${WORK_DIR}/grad")
run_ok(explore run "${WORK_DIR}/grad" --shape 3:7:5:4:9 --repeats 2 --warmup 1)
file(STRINGS "${WORK_DIR}/grad/results.csv" rows)
list(LENGTH rows count)
if (NOT count EQUAL 5)
    message(FATAL_ERROR "grad results.csv: expected a header and 4 rows, got:\n${rows}")
endif ()
foreach (row IN LISTS rows)
    # CPU rows: call_us is the same clock as us, and never host-bound.
    if (NOT row MATCHES "^point,tile_i,compile_s,valid,us,gbs,autoscheduler,compile_cpu_s,gflops,call_us,host_bound$"
        AND NOT row MATCHES "^\"space:tile_i=(1|8)\",(1|8),[0-9.e+-]+,1,[^,]+,[^,]+,,[0-9.e+-]+,[0-9.e+-]+,[0-9.e+-]+,0$"
        AND NOT row MATCHES "^\"cpu\",,[0-9.e+-]+,1,[^,]+,[^,]+,,[0-9.e+-]+,[0-9.e+-]+,[0-9.e+-]+,0$"
        AND NOT row MATCHES "^\"auto_mullapudi2016\",,[0-9.e+-]+,1,[^,]+,[^,]+,Mullapudi2016,[0-9.e+-]+,[0-9.e+-]+,[0-9.e+-]+,0$")
        message(FATAL_ERROR "grad results.csv: a row is missing, not valid or malformed: ${row}")
    endif ()
endforeach ()
file(READ "${WORK_DIR}/grad/points.json" points)
if (NOT points MATCHES "\"autoscheduler\": \"Mullapudi2016\"")
    message(FATAL_ERROR "grad points.json: the autoscheduler row is not marked:\n${points}")
endif ()

# The DigitCaps layer (3 routing iterations, b0 given) and the capsule
# convolution (stride 2, padding, odd sizes, co > 1) as explore rows: each
# is checked against the float64 reference and timed; every row valid.
run_ok(explore build --op digitcaps --device cpu --schedule cpu --out "${WORK_DIR}/digitcaps")
run_ok(explore run "${WORK_DIR}/digitcaps" --shape 3:7:5:4:9 --repeats 2 --warmup 1)
run_ok(explore build --op capsconv --device cpu --schedule cpu --schedule cpu_co4 --out "${WORK_DIR}/capsconv")
run_ok(explore run "${WORK_DIR}/capsconv" --shape 2:9:11:3:3:5:2:1 --repeats 2 --warmup 1)
foreach (op IN ITEMS digitcaps capsconv)
    file(STRINGS "${WORK_DIR}/${op}/results.csv" rows)
    list(LENGTH rows count)
    if (op STREQUAL "digitcaps")
        set(expected 2)
    else ()
        set(expected 3)
    endif ()
    if (NOT count EQUAL expected)
        message(FATAL_ERROR "${op} results.csv: expected ${expected} lines, got:\n${rows}")
    endif ()
    foreach (row IN LISTS rows)
        if (NOT row MATCHES "^point," AND NOT row MATCHES "^\"cpu(_co4)?\",[0-9.e+-]+,1,[0-9.e+-]+,")
            message(FATAL_ERROR "${op} results.csv: a row is not valid: ${row}")
        endif ()
    endforeach ()
endforeach ()

# CUDA points compile without a GPU: two points of a capsconv space.
run_ok(explore build --space "${SOURCE_DIR}/tests/spaces/tiny_capsconv_cuda.space" --out "${WORK_DIR}/capsconv_cuda")
file(STRINGS "${WORK_DIR}/capsconv_cuda/points.tsv" rows REGEX "^point")
list(LENGTH rows count)
if (NOT count EQUAL 2 OR NOT rows MATCHES "space:x_threads=8,y_threads=2,caps_tile=2\t[^\t]+\t[^\t]+\t[0-9.e+-]+\t[0-9.e+-]+\t1\t")
    message(FATAL_ERROR "capsconv_cuda points.tsv: expected two compiled points, got:\n${rows}")
endif ()

# An operator without a space: only the extra rows are built (not run).
run_ok(explore build --op predict_grad_weight --device cpu --schedule cpu --out "${WORK_DIR}/rows")
file(STRINGS "${WORK_DIR}/rows/points.tsv" rows REGEX "^point")
if (NOT rows MATCHES "^point\t0\tcpu\t[^\t]+\t[^\t]+\t[0-9.e+-]+\t[0-9.e+-]+\t1\t")
    message(FATAL_ERROR "rows points.tsv: expected one compiled row 'cpu', got:\n${rows}")
endif ()
foreach (args IN ITEMS "--op;predict;--device;cpu" "--op;predict;--device;cpu;--autoscheduler;Anderson2021"
                       "--space;${SOURCE_DIR}/tests/spaces/tiny_cpu.space;--op;digitcaps")
    execute_process(COMMAND "${CLI}" explore build ${args} --out "${WORK_DIR}/bad_rows"
                    RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if (result EQUAL 0 OR NOT err MATCHES "^halcaps: error: [^\n]+\n$")
        message(FATAL_ERROR "explore build ${args}: expected one error line, got ${result}: '${err}'")
    endif ()
    message(STATUS "${args} -> ${err}")
endforeach ()

# Malformed spaces: name, content, what the error must mention.
set(header "operator predict\ndevice cpu\n")
set(bad_names unknown_knob bad_value not_power_of_two duplicate_knob no_values unknown_directive no_device gpu_knob_on_cpu)
set(bad_unknown_knob "${header}knob tile_j 4 8\n")
set(bad_bad_value "${header}knob tile_i 4 eight\n")
set(bad_not_power_of_two "${header}knob tile_i 4 12\n")
set(bad_duplicate_knob "${header}knob tile_i 4\nknob tile_i 8\n")
set(bad_no_values "${header}knob tile_i\n")
set(bad_unknown_directive "${header}knobs tile_i 4\n")
set(bad_no_device "operator predict\nknob tile_i 4\n")
set(bad_gpu_knob_on_cpu "${header}knob ej_threads 32\n")
foreach (name IN LISTS bad_names)
    file(WRITE "${WORK_DIR}/${name}.space" "${bad_${name}}")
    execute_process(COMMAND "${CLI}" explore build --space "${WORK_DIR}/${name}.space" --out "${WORK_DIR}/${name}"
                    RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if (result EQUAL 0 OR NOT result MATCHES "^[0-9]+$")
        message(FATAL_ERROR "${name}: expected a non-zero exit code, got '${result}'")
    endif ()
    if (NOT err MATCHES "^halcaps: error: [^\n]*${name}\\.space:[0-9]+: [^\n]+\n$")
        message(FATAL_ERROR "${name}: expected one 'halcaps: error: FILE:LINE: ...' line, got '${err}'")
    endif ()
    if (EXISTS "${WORK_DIR}/${name}")
        message(FATAL_ERROR "${name}: the work directory was created for a malformed space")
    endif ()
    message(STATUS "${name} -> exit ${result}: ${err}")
endforeach ()

# A run without a build, and a point the generator rejects when called directly.
execute_process(COMMAND "${CLI}" explore run "${WORK_DIR}/nothing" RESULT_VARIABLE result ERROR_VARIABLE err)
if (result EQUAL 0 OR NOT err MATCHES "^halcaps: error: [^\n]*points.tsv[^\n]*\n$")
    message(FATAL_ERROR "run without build: got ${result}: '${err}'")
endif ()

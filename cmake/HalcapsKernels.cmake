# Building Halide generators into AOT libraries, and the table that lets the
# runtime find them by (generator, schedule, device).

# CPU kernels carry three ISA levels in one function; Halide picks the best one
# the running processor supports, so a binary built here runs on any x86-64.
set(HALCAPS_CPU_TARGETS
    x86-64-linux-sse41-avx-f16c-fma-avx2-avx512-avx512_skylake
    x86-64-linux-sse41-avx-f16c-fma-avx2
    x86-64-linux)
# CUDA kernels: baseline x86-64 host code; PTX for compute capability 8.0,
# which the driver compiles for the GPU at hand (sm_90 on H100 / H200).
set(HALCAPS_CUDA_TARGET x86-64-linux)
set(HALCAPS_CUDA_FEATURES cuda cuda_capability_80)
# OpenCL twins of the CUDA kernels (HALCAPS_HAVE_OPENCL): the same generator,
# schedule and parameters for OpenCL C 1.2, to check the GPU schedules on a
# machine without a GPU (PoCL in CI; README, "The OpenCL build").
# cuda_capability_80 has no OpenCL counterpart: the schedules use no
# feature beyond OpenCL C 1.2 (no 64-bit atomics, no half floats).
set(HALCAPS_OPENCL_TARGET x86-64-linux)
set(HALCAPS_OPENCL_FEATURES opencl)

# Every CUDA kernel gets an OpenCL twin, except those listed here, each with
# its reason, as "<generator or *>|<schedule>|<reason>" (no ';' in a reason:
# CMake would split it). The registry carries
# the list (opencl_exclusions()) and tests/test_opencl.cpp asserts it, so
# that it cannot grow unnoticed.
set(HALCAPS_OPENCL_EXCLUSIONS
    "*|auto_anderson2021|a beam search of 11-21 s a kernel on the 2-core build machine (HALCAPS_BEAM_SEARCH_KERNELS only), not tried for OpenCL")

# One Halide runtime for every kernel, with the GPU APIs built.
set(halcaps_runtime_target x86-64-linux)
if (HALCAPS_HAVE_CUDA)
    string(APPEND halcaps_runtime_target -cuda)
endif ()
if (HALCAPS_HAVE_OPENCL)
    string(APPEND halcaps_runtime_target -opencl)
endif ()
add_halide_runtime(halcaps_halide_runtime TARGETS ${halcaps_runtime_target})

# Halide's autoschedulers: Li2018 (for gradient pipelines; it schedules the
# autodiff kernels), Mullapudi2016 and Adams2019 (CPU) and Anderson2021
# (GPU). The pip package ships the plugins next to libHalide but no CMake
# targets for them, so make Halide::<Name> targets. Adams2019 and
# Anderson2021 use the cost-model weights built into their plugins.
get_target_property(halcaps_libhalide Halide::Halide IMPORTED_LOCATION_RELEASE)
get_filename_component(HALCAPS_AUTOSCHEDULER_DIR "${halcaps_libhalide}" DIRECTORY)
foreach (halcaps_plugin IN ITEMS Li2018 Mullapudi2016 Adams2019 Anderson2021)
    string(TOLOWER "${halcaps_plugin}" halcaps_plugin_file)
    set(halcaps_plugin_file "${HALCAPS_AUTOSCHEDULER_DIR}/libautoschedule_${halcaps_plugin_file}.so")
    if (TARGET Halide::${halcaps_plugin})
        continue()
    elseif (EXISTS "${halcaps_plugin_file}")
        add_library(Halide::${halcaps_plugin} MODULE IMPORTED)
        set_target_properties(Halide::${halcaps_plugin} PROPERTIES IMPORTED_LOCATION "${halcaps_plugin_file}")
    else ()
        message(STATUS "halcaps: no ${halcaps_plugin} autoscheduler plugin (${halcaps_plugin_file}); its kernels are skipped")
    endif ()
endforeach ()

set_property(GLOBAL PROPERTY HALCAPS_KERNEL_LIBRARIES "")
set_property(GLOBAL PROPERTY HALCAPS_KERNEL_ENTRIES "")

# The reason an OpenCL twin of <generator> <schedule> is not built, in
# <out> (empty when it is built).
function(halcaps_opencl_exclusion out generator schedule)
    set(reason "")
    foreach (entry IN LISTS HALCAPS_OPENCL_EXCLUSIONS)
        string(REPLACE "|" ";" fields "${entry}")
        list(GET fields 0 excluded_generator)
        list(GET fields 1 excluded_schedule)
        list(GET fields 2 excluded_reason)
        if ((excluded_generator STREQUAL "*" OR excluded_generator STREQUAL generator) AND
            excluded_schedule STREQUAL schedule)
            set(reason "${excluded_reason}")
        endif ()
    endforeach ()
    set(${out} "${reason}" PARENT_SCOPE)
endfunction()

# halcaps_read_space(<file> <prefix>): reads a schedule space
# (schedules/spaces/*.space, format in their headers) into <prefix>_OPERATOR,
# <prefix>_DEVICE, <prefix>_KNOBS (names) and <prefix>_KNOB_<name> (values).
function(halcaps_read_space file prefix)
    file(STRINGS "${file}" lines)
    set(knobs "")
    foreach (line IN LISTS lines)
        string(REGEX REPLACE "#.*" "" line "${line}")
        string(STRIP "${line}" line)
        if (line STREQUAL "")
            continue()
        endif ()
        separate_arguments(words UNIX_COMMAND "${line}")
        list(POP_FRONT words directive)
        if (directive STREQUAL "operator")
            set(${prefix}_OPERATOR ${words} PARENT_SCOPE)
        elseif (directive STREQUAL "device")
            set(${prefix}_DEVICE ${words} PARENT_SCOPE)
        elseif (directive STREQUAL "knob")
            list(POP_FRONT words knob)
            list(APPEND knobs ${knob})
            set(${prefix}_KNOB_${knob} ${words} PARENT_SCOPE)
        else ()
            message(FATAL_ERROR "${file}: unknown directive '${directive}'")
        endif ()
    endforeach ()
    set(${prefix}_KNOBS ${knobs} PARENT_SCOPE)
endfunction()

# A schedule named by a point of a space ("space:tile_i=32,vec_mult=2", as
# `halcaps explore` writes in best.txt) must only set knobs that the space
# schedules/spaces/<generator>_<device>.space declares: a typo then stops
# the configure step with the file to look at, rather than the build.
# (Values are checked by the generator, against schedules/space_knobs.h.)
function(halcaps_check_space_point generator point device)
    # An OpenCL twin's point is a point of the CUDA space.
    set(space_device ${device})
    if (device STREQUAL "opencl")
        set(space_device cuda)
    endif ()
    set(file "${PROJECT_SOURCE_DIR}/schedules/spaces/${generator}_${space_device}.space")
    if (NOT EXISTS "${file}")
        message(FATAL_ERROR "halcaps_add_kernel(${generator} ${point} ${device}): no space file ${file}")
    endif ()
    halcaps_read_space("${file}" space)
    string(REGEX REPLACE "^space:" "" items "${point}")
    string(REPLACE "," ";" items "${items}")
    foreach (item IN LISTS items)
        string(REGEX REPLACE "=.*" "" knob "${item}")
        if (NOT knob IN_LIST space_KNOBS)
            message(FATAL_ERROR "halcaps_add_kernel(${generator} ${point} ${device}): knob '${knob}' is not in ${file} (knobs: ${space_KNOBS})")
        endif ()
    endforeach ()
endfunction()

# halcaps_add_kernel(<generator> <schedule> <cpu|cuda|opencl> [ITERATIONS n] [AUTOSCHEDULER plugin] [PLUGIN plugin])
# Builds library halcaps_<generator>__<schedule> exporting a function of the
# same name (an OpenCL kernel: halcaps_opencl_<generator>__<schedule>); a
# CUDA kernel also gets its OpenCL twin when OpenCL is built (unless
# HALCAPS_OPENCL_EXCLUSIONS lists it), even where CUDA is not; with ITERATIONS (routing generators: the unrolled iteration
# count) the name is halcaps_<generator>_<n>it__<schedule>. With AUTOSCHEDULER
# (e.g. Halide::Li2018) the generator's stages are scheduled by that plugin
# instead of by schedules/. With PLUGIN (e.g. Halide::Adams2019) the plugin is
# loaded and the schedule (auto_adams2019, ...) runs it from the schedule
# code, which then guards its tails (schedules/autoschedule.h); its
# parameters are in schedules/autoschedulers.h. A schedule may be a point of the operator's space
# ("space:knob=value,..."): the library name then spells it with '_' for
# the punctuation, the generator gets it with ':' for '=' (its command line
# splits parameters at '='), and the runtime knows it by the name as given.
function(halcaps_add_kernel generator schedule device)
    cmake_parse_arguments(PARSE_ARGV 3 ARG "" "ITERATIONS;AUTOSCHEDULER;PLUGIN" "PARAMS")
    if (device STREQUAL "cuda" AND HALCAPS_HAVE_OPENCL)
        halcaps_opencl_exclusion(excluded ${generator} "${schedule}")
        if (NOT excluded)
            halcaps_add_kernel(${generator} "${schedule}" opencl ${ARGN})
        endif ()
    endif ()
    string(MAKE_C_IDENTIFIER "${schedule}" schedule_id)
    set(prefix halcaps_)
    if (device STREQUAL "opencl")
        set(prefix halcaps_opencl_)
    endif ()
    set(name ${prefix}${generator}__${schedule_id})
    set(params schedule=${schedule})
    if (schedule MATCHES "^space:")
        halcaps_check_space_point(${generator} "${schedule}" ${device})
        string(REPLACE "=" ":" generator_spelling "${schedule}")
        set(params schedule=${generator_spelling})
    endif ()
    set(iterations 0)
    if (ARG_ITERATIONS)
        set(iterations ${ARG_ITERATIONS})
        set(name ${prefix}${generator}_${iterations}it__${schedule_id})
        list(APPEND params iterations=${iterations})
    endif ()
    # PARAMS: the generator's other parameters (an algorithm form a schedule needs).
    list(APPEND params ${ARG_PARAMS})
    set(autoscheduler "")
    if ((ARG_AUTOSCHEDULER AND NOT TARGET ${ARG_AUTOSCHEDULER}) OR (ARG_PLUGIN AND NOT TARGET ${ARG_PLUGIN}))
        return()
    endif ()
    if (ARG_AUTOSCHEDULER)
        # Li2018's knob: the parallelism to aim for (cores); 16 suits both the
        # 2-core CI machine (it only over-decomposes) and larger hosts.
        set(autoscheduler AUTOSCHEDULER ${ARG_AUTOSCHEDULER})
        list(APPEND params autoscheduler.parallelism=16)
    endif ()
    if (ARG_PLUGIN)
        set(autoscheduler PLUGINS ${ARG_PLUGIN})
    endif ()
    # The lowered statement (with the PTX) only for single-target kernels:
    # for the CPU's several targets Halide names one .stmt per target, so the
    # declared NAME.stmt never appears and ninja would regenerate every CPU
    # kernel on each build.
    if (device STREQUAL "cpu")
        set(targets ${HALCAPS_CPU_TARGETS})
        set(features user_context)
        set(stmt "")
    elseif (device STREQUAL "cuda")
        if (NOT HALCAPS_HAVE_CUDA)
            return()
        endif ()
        set(targets ${HALCAPS_CUDA_TARGET})
        set(features user_context ${HALCAPS_CUDA_FEATURES})
        set(stmt STMT stmt_file)
    elseif (device STREQUAL "opencl")
        if (NOT HALCAPS_HAVE_OPENCL)
            return()
        endif ()
        set(targets ${HALCAPS_OPENCL_TARGET})
        set(features user_context ${HALCAPS_OPENCL_FEATURES})
        set(stmt "")
    else ()
        message(FATAL_ERROR "halcaps_add_kernel(${generator} ${schedule} ${device}): device must be cpu, cuda or opencl")
    endif ()
    add_halide_library(${name} FROM halcaps_generators
                       GENERATOR ${generator}
                       FUNCTION_NAME ${name}
                       USE_RUNTIME halcaps_halide_runtime
                       PARAMS ${params}
                       TARGETS ${targets}
                       FEATURES ${features}
                       ${autoscheduler}
                       ${stmt})
    set_property(GLOBAL APPEND PROPERTY HALCAPS_KERNEL_LIBRARIES ${name})
    set_property(GLOBAL APPEND PROPERTY HALCAPS_KERNEL_ENTRIES "${generator}|${schedule}|${device}|${iterations}|${name}")
endfunction()

# Writes the C++ table of every kernel added so far (runtime/src/kernel_registry.h).
function(halcaps_write_kernel_registry path)
    get_property(entries GLOBAL PROPERTY HALCAPS_KERNEL_ENTRIES)
    set(includes "")
    set(rows "")
    set(exclusion_rows "")
    foreach (entry IN LISTS HALCAPS_OPENCL_EXCLUSIONS)
        string(REPLACE "|" ";" fields "${entry}")
        list(GET fields 0 generator)
        list(GET fields 1 schedule)
        list(GET fields 2 reason)
        string(REPLACE "\"" "\\\"" reason "${reason}")
        string(APPEND exclusion_rows "        {\"${generator}\", \"${schedule}\", \"${reason}\"},\n")
    endforeach ()
    foreach (entry IN LISTS entries)
        string(REPLACE "|" ";" fields "${entry}")
        list(GET fields 0 generator)
        list(GET fields 1 schedule)
        list(GET fields 2 device)
        list(GET fields 3 iterations)
        list(GET fields 4 name)
        string(APPEND includes "#include \"${name}.h\"\n")
        string(APPEND rows "        {\"${generator}\", \"${schedule}\", Device::${device}, ${iterations}, {&${name}_argv, &${name}_metadata}},\n")
    endforeach ()
    file(CONFIGURE OUTPUT "${path}" CONTENT "// Generated by cmake/HalcapsKernels.cmake from schedules/kernels.cmake; do not edit.
#include \"kernel_registry.h\"

${includes}
namespace halcaps::detail {

const std::vector<HalideKernelEntry> &halide_kernels() {
    static const std::vector<HalideKernelEntry> kernels = {
${rows}    };
    return kernels;
}

const std::vector<OpenCLExclusion> &opencl_exclusions() {
    static const std::vector<OpenCLExclusion> exclusions = {
${exclusion_rows}    };
    return exclusions;
}

}  // namespace halcaps::detail
" @ONLY)
endfunction()

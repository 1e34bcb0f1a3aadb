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

if (HALCAPS_HAVE_CUDA)
    add_halide_runtime(halcaps_halide_runtime TARGETS x86-64-linux-cuda)
else ()
    add_halide_runtime(halcaps_halide_runtime TARGETS x86-64-linux)
endif ()

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
    set(file "${PROJECT_SOURCE_DIR}/schedules/spaces/${generator}_${device}.space")
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

# halcaps_add_kernel(<generator> <schedule> <cpu|cuda> [ITERATIONS n] [AUTOSCHEDULER plugin] [PLUGIN plugin])
# Builds library halcaps_<generator>__<schedule> exporting a function of the
# same name; with ITERATIONS (routing generators: the unrolled iteration
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
    cmake_parse_arguments(PARSE_ARGV 3 ARG "" "ITERATIONS;AUTOSCHEDULER;PLUGIN" "")
    string(MAKE_C_IDENTIFIER "${schedule}" schedule_id)
    set(name halcaps_${generator}__${schedule_id})
    set(params schedule=${schedule})
    if (schedule MATCHES "^space:")
        halcaps_check_space_point(${generator} "${schedule}" ${device})
        string(REPLACE "=" ":" generator_spelling "${schedule}")
        set(params schedule=${generator_spelling})
    endif ()
    set(iterations 0)
    if (ARG_ITERATIONS)
        set(iterations ${ARG_ITERATIONS})
        set(name halcaps_${generator}_${iterations}it__${schedule_id})
        list(APPEND params iterations=${iterations})
    endif ()
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
    else ()
        message(FATAL_ERROR "halcaps_add_kernel(${generator} ${schedule} ${device}): device must be cpu or cuda")
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
    foreach (entry IN LISTS entries)
        string(REPLACE "|" ";" fields "${entry}")
        list(GET fields 0 generator)
        list(GET fields 1 schedule)
        list(GET fields 2 device)
        list(GET fields 3 iterations)
        list(GET fields 4 name)
        string(APPEND includes "#include \"${name}.h\"\n")
        string(APPEND rows "        {\"${generator}\", \"${schedule}\", Device::${device}, ${iterations}, HalideKernel(&${name})},\n")
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

}  // namespace halcaps::detail
" @ONLY)
endfunction()

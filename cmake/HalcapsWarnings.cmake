# Compiler warnings on the project's own code: -Wall -Wextra, as errors
# unless HALCAPS_WARNINGS_AS_ERRORS is OFF. C++ sources get the flags
# directly, CUDA sources pass them to the host compiler and make nvcc's own
# warnings errors too. Third-party headers come in as system headers
# (imported targets, -isystem), so their warnings stay silent. Generated
# code (the Halide kernels' headers and objects, the kernel table) is not
# ours to fix: halcaps_exempt_generated() keeps -Werror off such a source.
#
#   halcaps_set_warnings(<target>...)      the flags on each target's own sources
#   halcaps_exempt_generated(<source>...)  warnings never fail these sources
option(HALCAPS_WARNINGS_AS_ERRORS "Compiler warnings are errors on the project's own code (generated code exempt)" ON)

function(halcaps_set_warnings)
    set(cxx_flags -Wall -Wextra)
    set(cuda_flags -Xcompiler=-Wall,-Wextra)
    if (HALCAPS_WARNINGS_AS_ERRORS)
        list(APPEND cxx_flags -Werror)
        list(APPEND cuda_flags -Xcompiler=-Werror --Werror=all-warnings)
    endif ()
    foreach (target IN LISTS ARGN)
        target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${cxx_flags}>"
                                                 "$<$<COMPILE_LANGUAGE:CUDA>:${cuda_flags}>")
    endforeach ()
endfunction()

function(halcaps_exempt_generated)
    set_source_files_properties(${ARGN} PROPERTIES COMPILE_OPTIONS -Wno-error)
endfunction()

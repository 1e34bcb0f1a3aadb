# Installs the build tree into a fresh prefix, then configures, builds and runs
# tests/downstream against it. Invoked by ctest with -D BUILD_DIR, SOURCE_DIR,
# WORK_DIR, CMAKE_GENERATOR.
file(REMOVE_RECURSE "${WORK_DIR}")
foreach (step IN ITEMS install configure build run)
    if (step STREQUAL "install")
        set(command ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
    elseif (step STREQUAL "configure")
        set(command ${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/build" -G "${CMAKE_GENERATOR}"
            -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
    elseif (step STREQUAL "build")
        set(command ${CMAKE_COMMAND} --build "${WORK_DIR}/build")
    else ()
        set(command "${WORK_DIR}/build/downstream")
    endif ()
    execute_process(COMMAND ${command} RESULT_VARIABLE result)
    if (NOT result EQUAL 0)
        message(FATAL_ERROR "downstream ${step} failed (${result}): ${command}")
    endif ()
endforeach ()

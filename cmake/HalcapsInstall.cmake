# `cmake --install` lays down the static libraries (runtime API, every kernel,
# the shared Halide runtime), the public headers and a CMake package, so that
# an application only needs `find_package(halcaps)` and `halcaps::halcaps`.
include(CMakePackageConfigHelpers)

# Halide::Runtime only carries Halide's headers, which our public headers do
# not use; keep it out of the installed link interface so that users need no
# Halide installation.
set_property(TARGET halcaps_halide_runtime PROPERTY INTERFACE_LINK_LIBRARIES
             "$<BUILD_INTERFACE:Halide::Runtime>;Threads::Threads;${CMAKE_DL_LIBS}")

get_property(halcaps_kernel_libraries GLOBAL PROPERTY HALCAPS_KERNEL_LIBRARIES)
if (TARGET halcaps_cuda_kernels)
    list(APPEND halcaps_kernel_libraries halcaps_cuda_kernels)
endif ()
install(TARGETS halcaps ${halcaps_kernel_libraries} halcaps_halide_runtime
        EXPORT halcapsTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        # the generated kernel headers (plain C declarations), for advanced use
        FILE_SET HEADERS DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/halcaps/kernels)
install(DIRECTORY runtime/include/halcaps DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT halcapsTargets
        NAMESPACE halcaps::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/halcaps)
configure_package_config_file(cmake/halcapsConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/halcapsConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/halcaps)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/halcapsConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/halcapsConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/halcapsConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/halcaps)

# `cmake --install build --prefix DIR`: the public headers, libkiln, the kiln tool, a CMake package
# (find_package(kiln CONFIG) -> kiln::kiln) and kiln.pc. Included from the top-level CMakeLists.txt.
include(CMakePackageConfigHelpers)
set(KILN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/kiln CACHE STRING "Where kilnConfig.cmake is installed")

install(DIRECTORY include/kiln DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${KILN_GENERATED_INCLUDE}/kiln/tensor_methods.inc DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln)
install(TARGETS kiln EXPORT kilnTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET kiln_cli)
  # The installed tool finds the installed libkiln wherever the prefix is moved.
  file(RELATIVE_PATH kiln_bin_to_lib "/p/${CMAKE_INSTALL_BINDIR}" "/p/${CMAKE_INSTALL_LIBDIR}")
  set_target_properties(kiln_cli PROPERTIES INSTALL_RPATH "$ORIGIN/${kiln_bin_to_lib}")
  install(TARGETS kiln_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${KILN_INSTALL_CMAKEDIR})
configure_package_config_file(cmake/kilnConfig.cmake.in ${CMAKE_BINARY_DIR}/kilnConfig.cmake
                              INSTALL_DESTINATION ${KILN_INSTALL_CMAKEDIR})
# 0.x: a minor release may break the API, so 0.1 satisfies only requests for 0.1.*.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/kilnConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/kilnConfig.cmake ${CMAKE_BINARY_DIR}/kilnConfigVersion.cmake
        DESTINATION ${KILN_INSTALL_CMAKEDIR})

# kiln.pc names its prefix relative to itself (${pcfiledir}), so `--prefix DIR` at install time works.
file(RELATIVE_PATH kiln_pc_to_prefix "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
string(REGEX REPLACE "/$" "" kiln_pc_to_prefix "${kiln_pc_to_prefix}")
string(REPLACE ";" " " kiln_pc_openmp "${OpenMP_CXX_FLAGS}")
configure_file(cmake/kiln.pc.in ${CMAKE_BINARY_DIR}/kiln.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/kiln.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# `cmake --install`: the libraries, the command line, the public headers (include/dmalab/*.h, and
# nothing else: the internal headers of common/, sim/, hw/ and measure/ stay in the tree), and a
# package config so that other projects write
#   find_package(dmalab 0.1 REQUIRED)   # optionally COMPONENTS hw
#   target_link_libraries(app PRIVATE dmalab::sim)
# Components (targets): core, ring, plugin, scenario, common (all four), sim, measure, and hw
# when the CUDA backend was built. examples/consumer/ is such a project.
include(CMakePackageConfigHelpers)
set(DMALAB_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/dmalab)

get_property(dmalab_targets GLOBAL PROPERTY DMALAB_EXPORTED_TARGETS)
set_target_properties(dmalab PROPERTIES EXPORT_NAME dmalab)
install(TARGETS ${dmalab_targets} dmalab
  EXPORT dmalabTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT dmalabTargets NAMESPACE dmalab:: DESTINATION ${DMALAB_CMAKE_DIR})

install(DIRECTORY include/dmalab DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")

set(DMALAB_COMPONENTS core ring plugin scenario common sim measure)
set(DMALAB_CUDA_ROOT "")
if(DMALAB_HAVE_CUDA)
  list(APPEND DMALAB_COMPONENTS hw)
  get_filename_component(DMALAB_CUDA_ROOT ${CUDAToolkit_BIN_DIR} DIRECTORY)
endif()
configure_package_config_file(cmake/dmalabConfig.cmake.in
  ${PROJECT_BINARY_DIR}/dmalabConfig.cmake INSTALL_DESTINATION ${DMALAB_CMAKE_DIR})
# Before 1.0 a minor version may change the interfaces.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dmalabConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dmalabConfig.cmake ${PROJECT_BINARY_DIR}/dmalabConfigVersion.cmake
        DESTINATION ${DMALAB_CMAKE_DIR})

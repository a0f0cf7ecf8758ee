# How dmalab's libraries are declared for use inside this build and, installed, by other
# projects (cmake/dmalab_install.cmake).
#
# Include paths. In the source tree headers include each other by their path from the repository
# root ("include/dmalab/device.h"). Installed, the same tree sits under include/dmalab/, and a
# consumer writes the prefixed path (<dmalab/common/ring/dma_all_reduce.h>); both include/ (for the
# prefix) and include/dmalab/ (for the headers' own includes) are on the exported include path.
# The build tree offers the same prefix through build/include/dmalab, a link to the sources, so
# code inside the tree may use either form.
set(DMALAB_BUILD_INCLUDE_DIR ${PROJECT_BINARY_DIR}/include)
file(MAKE_DIRECTORY ${DMALAB_BUILD_INCLUDE_DIR})
if(NOT EXISTS ${DMALAB_BUILD_INCLUDE_DIR}/dmalab)
  file(CREATE_LINK ${PROJECT_SOURCE_DIR} ${DMALAB_BUILD_INCLUDE_DIR}/dmalab SYMBOLIC)
endif()

# dmalab_export_library(TARGET EXPORT_NAME): `TARGET` gets the include paths above, the alias
# dmalab::EXPORT_NAME, and joins the installed and exported target set under that name.
function(dmalab_export_library target export_name)
  get_target_property(type ${target} TYPE)
  set(scope PUBLIC)
  if(type STREQUAL "INTERFACE_LIBRARY")
    set(scope INTERFACE)
  endif()
  target_include_directories(${target} ${scope}
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<BUILD_INTERFACE:${DMALAB_BUILD_INCLUDE_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/dmalab>)
  # A top-level include/ (public C headers such as include/dmalab/*.h) installs as it is.
  if(EXISTS ${PROJECT_SOURCE_DIR}/include)
    target_include_directories(${target} ${scope} $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>)
  endif()
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name})
  add_library(dmalab::${export_name} ALIAS ${target})
  set_property(GLOBAL APPEND PROPERTY DMALAB_EXPORTED_TARGETS ${target})
endfunction()

# How dmalab's libraries are declared for use inside this build and, installed, by other
# projects (cmake/dmalab_install.cmake).
#
# Include paths. The public API is include/dmalab/*.h, included as "dmalab/device.h" inside the
# tree and <dmalab/device.h> by a consumer; it is the only thing installed, and its headers include
# only each other and third-party headers (tests/package/consumer_test.sh compiles each alone
# against the install). Internal headers are included by their path from the repository root
# ("common/ring/dma_all_reduce.h", "sim/sim_device.h"): the root is on the include path of the
# build tree only.

# dmalab_export_library(TARGET EXPORT_NAME): `TARGET` gets the include paths above, the alias
# dmalab::EXPORT_NAME, and joins the installed and exported target set under that name.
function(dmalab_export_library target export_name)
  get_target_property(type ${target} TYPE)
  set(scope PUBLIC)
  if(type STREQUAL "INTERFACE_LIBRARY")
    set(scope INTERFACE)
  endif()
  target_include_directories(${target} ${scope}
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name})
  add_library(dmalab::${export_name} ALIAS ${target})
  set_property(GLOBAL APPEND PROPERTY DMALAB_EXPORTED_TARGETS ${target})
endfunction()

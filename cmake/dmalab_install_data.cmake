# `cmake --install`: what the installed command line reads, laid out under <prefix>/share/dmalab as
# in the source tree, so that an installed `dmalab zoo` finds it beside itself and names the same
# relative files (tools/zoo_command.cc: <bin>/../share/dmalab, plugins in <bin>/../lib/dmalab/plugins):
#   share/dmalab/scenarios/        the shipped scenarios, topologies and their format references
#   share/dmalab/tests/zoo/        the zoo's own fault scenarios
#   share/dmalab/examples/plugins/ the example plugins' scenarios and sources (read beside the guide)
#   lib/dmalab/plugins/NAME.so     the example plugins, bug and fix
set(DMALAB_DATA_DIR share/dmalab)
set(DMALAB_PLUGIN_DIR lib/dmalab/plugins)

install(DIRECTORY scenarios/ DESTINATION ${DMALAB_DATA_DIR}/scenarios
        FILES_MATCHING PATTERN "*.yaml" PATTERN "*.md")
install(DIRECTORY tests/zoo/ DESTINATION ${DMALAB_DATA_DIR}/tests/zoo
        FILES_MATCHING PATTERN "*.yaml")
install(DIRECTORY examples/plugins/ DESTINATION ${DMALAB_DATA_DIR}/examples/plugins
        FILES_MATCHING PATTERN "*.yaml" PATTERN "*.c" PATTERN "*.h" PATTERN "*.cc" PATTERN "*.cu")

get_property(dmalab_example_plugins GLOBAL PROPERTY DMALAB_EXAMPLE_PLUGINS)
if(TARGET cuda_native)
  list(APPEND dmalab_example_plugins cuda_native)
endif()
# The plugins are modules loaded with dlopen by path; they need no RPATH of dmalab's (the C ones
# use only the header, dma_ring_v2 links dmalab's libraries statically).
install(TARGETS ${dmalab_example_plugins} LIBRARY DESTINATION ${DMALAB_PLUGIN_DIR})

#include "common/core/version.h"

#ifndef DMALAB_VERSION
#error "DMALAB_VERSION is set by common/core/CMakeLists.txt from project(VERSION)"
#endif

namespace dmalab {

const char* ToolVersion() { return DMALAB_VERSION; }

}  // namespace dmalab

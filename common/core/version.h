// The tool's version, set in one place (CMakeLists.txt: project(dmalab VERSION ...)), and the
// version of the JSON documents the command line writes (docs/json.md).
#ifndef DMALAB_COMMON_CORE_VERSION_H_
#define DMALAB_COMMON_CORE_VERSION_H_

namespace dmalab {

// "0.1.0": CMake's PROJECT_VERSION.
const char* ToolVersion();

// The schema version of every JSON document dmalab writes ("schema_version"). Raised when a
// key is removed or changes meaning; adding keys keeps it.
inline constexpr int kJsonSchemaVersion = 1;

}  // namespace dmalab

#endif  // DMALAB_COMMON_CORE_VERSION_H_

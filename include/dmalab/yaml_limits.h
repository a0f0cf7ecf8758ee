// Bounds on what one YAML input file (a scenario, a topology) may make a loader do; each is a
// located error beyond it (YamlFields::ParseOneDocument, ReadYamlFile). The shipped files are a
// few KB, a few thousand nodes and 10 levels deep.
#ifndef DMALAB_YAML_LIMITS_H_
#define DMALAB_YAML_LIMITS_H_

#include <cstddef>
#include <cstdint>

namespace dmalab {

inline constexpr size_t kMaxYamlFileBytes = size_t{4} << 20;  // 4 MiB of text
// YAML nodes, counted as often as they are reached: an alias counts its anchor's nodes again.
inline constexpr int64_t kMaxYamlNodes = 100000;
inline constexpr int kMaxYamlDepth = 64;  // lists and maps within lists and maps

}  // namespace dmalab

#endif  // DMALAB_YAML_LIMITS_H_

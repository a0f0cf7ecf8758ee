// Reads a scenario YAML file (format: scenarios/README.md) into a valid Scenario.
//
// Errors are InvalidArgument statuses with a located message (common/scenario/yaml_fields.h):
//   glm.yaml:7:10: field 'world': found 17, allowed an integer in 2..16
// Besides syntax and types, the loader checks what a replay needs: every tensor name is declared,
// every tensor's element count is divisible by world * 8, operands agree in shape and dtype, and
// walking the steps (repeats included) only ever uses tensors that are live, releases live ones,
// and expects only retained ones.
#ifndef DMALAB_SCENARIO_LOADER_H_
#define DMALAB_SCENARIO_LOADER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "dmalab/scenario.h"
#include "dmalab/yaml_limits.h"

namespace dmalab {

// Bounds on what a scenario file may make the loader do (those of every YAML input file); each
// is a located error beyond it.
inline constexpr size_t kMaxScenarioFileBytes = kMaxYamlFileBytes;
inline constexpr int64_t kMaxScenarioNodes = kMaxYamlNodes;
inline constexpr int kMaxScenarioDepth = kMaxYamlDepth;

// Parses YAML text (one document; anchors and aliases are allowed, a cycle of aliases is an
// error); `file_name` is used in error messages and as Scenario::file.
absl::StatusOr<Scenario> ParseScenario(std::string_view yaml, std::string_view file_name);

// Reads and parses a file. A file that cannot be read is a NotFound error naming the path; a
// directory, or a file longer than kMaxScenarioFileBytes (read no further), is InvalidArgument.
absl::StatusOr<Scenario> LoadScenarioFile(const std::string& path);

}  // namespace dmalab

#endif  // DMALAB_SCENARIO_LOADER_H_

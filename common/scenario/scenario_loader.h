// Reads a scenario YAML file (format: scenarios/README.md) into a valid Scenario.
//
// Errors are InvalidArgument statuses with a located message (common/scenario/yaml_fields.h):
//   glm.yaml:7:10: field 'world': found 17, allowed an integer in 2..16
// Besides syntax and types, the loader checks what a replay needs: every tensor name is declared,
// every tensor's element count is divisible by world * 8, operands agree in shape and dtype, and
// walking the steps (repeats included) only ever uses tensors that are live, releases live ones,
// and expects only retained ones.
#ifndef DMALAB_COMMON_SCENARIO_SCENARIO_LOADER_H_
#define DMALAB_COMMON_SCENARIO_SCENARIO_LOADER_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/scenario/scenario.h"

namespace dmalab {

// Parses YAML text; `file_name` is used in error messages and as Scenario::file.
absl::StatusOr<Scenario> ParseScenario(std::string_view yaml, std::string_view file_name);

// Reads and parses a file. A file that cannot be read is a NotFound error naming the path.
absl::StatusOr<Scenario> LoadScenarioFile(const std::string& path);

}  // namespace dmalab

#endif  // DMALAB_COMMON_SCENARIO_SCENARIO_LOADER_H_

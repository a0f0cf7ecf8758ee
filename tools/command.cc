#include "tools/command.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/plugin/open_collective.h"
#include "tools/exit_status.h"

namespace dmalab {

absl::Status CheckCollective(const std::string& name) {
  if (name == kRingCollective || IsPluginPath(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "value '%s' is not a collective; allowed: ring (the DMA ring all-reduce), or the path of a "
      "plugin's shared library (containing '/' or ending in .so; include/dmalab/plugin.h)",
      name));
}

std::string CollectiveAsWritten(const std::string& name) {
  if (!IsPluginPath(name) || name.find('/') != std::string::npos) return name;
  return "./" + name;
}

absl::Status CheckCollectiveOptions(const RunFlags& run, std::string_view where) {
  if (run.collective_options.empty()) return absl::OkStatus();
  if (run.collective == kRingCollective) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--collective-options: '%s' is for a plugin; the ring takes its settings from the "
        "scenario and flags",
        run.collective_options));
  }
  if (!where.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--collective-options: %s does not take plugin options yet; use a single replay or demo",
        where));
  }
  return absl::OkStatus();
}

int ExitStatus(std::string_view command, const absl::StatusOr<int>& run) {
  if (run.ok()) return *run;
  absl::string_view message = run.status().message();
  absl::ConsumePrefix(&message, absl::StrCat(std::string(command), ": "));
  std::fprintf(stderr, "dmalab %s: %s\n", std::string(command).c_str(),
               std::string(message).c_str());
  return cli::kExitUsage;
}

}  // namespace dmalab

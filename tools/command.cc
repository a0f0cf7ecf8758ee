#include "tools/command.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_format.h"
#include "common/plugin/open_collective.h"

namespace dmalab {

absl::Status CheckCollective(const std::string& name) {
  if (name == kRingCollective || IsPluginPath(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "value '%s' is not a collective; allowed: ring (the DMA ring all-reduce), or the path of a "
      "plugin's shared library (containing '/' or ending in .so; include/dmalab/plugin.h)",
      name));
}

absl::Status WriteTextFile(const std::string& path, std::string_view text) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrFormat("cannot write '%s': %s", path, std::strerror(errno)));
  }
  const bool written =
      std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0;
  const int error = errno;
  if (std::fclose(f) != 0 || !written) {
    return absl::DataLossError(
        absl::StrFormat("cannot write '%s': %s", path, std::strerror(written ? errno : error)));
  }
  return absl::OkStatus();
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

}  // namespace dmalab

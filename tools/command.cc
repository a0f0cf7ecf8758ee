#include "tools/command.h"

#include <fstream>

#include "absl/strings/str_format.h"

namespace dmalab {

absl::Status CheckCollective(const std::string& name) {
  if (name == "ring") return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "value '%s' is not a collective this build has; allowed: ring (the DMA ring all-reduce)",
      name));
}

absl::Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::UnavailableError(absl::StrFormat("cannot write '%s'", path));
  return absl::OkStatus();
}

}  // namespace dmalab

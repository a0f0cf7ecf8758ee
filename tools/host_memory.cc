#include "tools/host_memory.h"

#include <unistd.h>

#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_format.h"

namespace dmalab {

uint64_t AvailableMemoryBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key, unit;
    uint64_t kib = 0;
    if (fields >> key >> kib >> unit && key == "MemAvailable:" && unit == "kB") return kib * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  return std::numeric_limits<uint64_t>::max();
}

std::string BytesText(uint64_t bytes) {
  return absl::StrFormat("%d bytes (%.1f GiB)", bytes, bytes / 1073741824.0);
}

}  // namespace dmalab

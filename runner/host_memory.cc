#include "runner/host_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace dmalab {
namespace {

// The first line of `path` as a number of bytes; nothing when the file is missing, says "max"
// or holds anything else.
std::optional<uint64_t> ReadBytes(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  uint64_t v = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &v)) return std::nullopt;
  return v;
}

// A value of /proc/meminfo or /proc/self/status ("MemAvailable:", "VmSize:"), in bytes.
std::optional<uint64_t> ProcKib(const std::string& path, const std::string& key) {
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line)) {
    std::istringstream fields(line);
    std::string k, unit;
    uint64_t kib = 0;
    if (fields >> k >> kib >> unit && k == key && unit == "kB") return kib * 1024;
  }
  return std::nullopt;
}

// A limit this large means none (cgroup v1 writes PAGE_COUNTER_MAX pages, about 2^63).
constexpr uint64_t kUnlimited = uint64_t{1} << 62;

// One cgroup directory and its ancestors up to `mount`: the least of limit - usage.
void TightenCgroup(MemoryLimit& limit, const std::string& mount, std::string path,
                   const char* limit_file, const char* usage_file) {
  while (true) {
    const std::string dir = mount + path;
    const std::optional<uint64_t> max = ReadBytes(dir + "/" + limit_file);
    if (max && *max < kUnlimited) {
      const uint64_t used = ReadBytes(dir + "/" + usage_file).value_or(0);
      Tighten(limit, *max > used ? *max - used : 0,
              absl::StrFormat("cgroup %s (%s %d bytes, %d in use)", dir, limit_file, *max, used));
    }
    if (path.empty() || path == "/") break;
    path = path.substr(0, path.rfind('/'));
  }
}

// A resource limit less what this process already uses of it (a `status_key` of
// /proc/self/status).
void TightenRlimit(MemoryLimit& limit, int resource, const char* name, const char* status_key) {
  struct rlimit r {};
  if (getrlimit(resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return;
  const uint64_t used = ProcKib("/proc/self/status", status_key).value_or(0);
  const uint64_t cap = static_cast<uint64_t>(r.rlim_cur);
  Tighten(limit, cap > used ? cap - used : 0,
          absl::StrFormat("%s (%d bytes, %d mapped)", name, cap, used));
}

}  // namespace

void Tighten(MemoryLimit& limit, uint64_t bytes, const std::string& source) {
  if (bytes < limit.bytes) limit = MemoryLimit{bytes, source};
}

MemoryLimit CgroupMemoryLimit(const std::string& root, const std::string& proc_self_cgroup) {
  MemoryLimit limit;
  for (absl::string_view line : absl::StrSplit(proc_self_cgroup, '\n')) {
    // "ID:CONTROLLERS:PATH"; v2 is "0::PATH".
    const std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3 || f[2].empty() || f[2][0] != '/') continue;
    const std::string path = f[2] == "/" ? "" : f[2];
    if (f[1].empty()) {
      for (const char* mount : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
        TightenCgroup(limit, root + mount, path, "memory.max", "memory.current");
      }
      continue;
    }
    for (absl::string_view c : absl::StrSplit(f[1], ',')) {
      if (c != "memory") continue;
      TightenCgroup(limit, root + "/sys/fs/cgroup/memory", path, "memory.limit_in_bytes",
                    "memory.usage_in_bytes");
    }
  }
  return limit;
}

MemoryLimit AvailableMemory() {
  MemoryLimit limit;
  if (std::optional<uint64_t> avail = ProcKib("/proc/meminfo", "MemAvailable:")) {
    Tighten(limit, *avail, "MemAvailable");
  } else if (const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
             pages > 0 && page > 0) {
    Tighten(limit, static_cast<uint64_t>(pages) * static_cast<uint64_t>(page), "free pages");
  }
  TightenRlimit(limit, RLIMIT_AS, "RLIMIT_AS", "VmSize:");
  TightenRlimit(limit, RLIMIT_DATA, "RLIMIT_DATA", "VmData:");
  std::ifstream cgroup("/proc/self/cgroup");
  std::stringstream text;
  text << cgroup.rdbuf();
  const MemoryLimit c = CgroupMemoryLimit("", text.str());
  Tighten(limit, c.bytes, c.source);
  return limit;
}

uint64_t AvailableMemoryBytes() { return AvailableMemory().bytes; }

std::string BytesText(uint64_t bytes) {
  return absl::StrFormat("%d bytes (%.1f GiB)", bytes, bytes / 1073741824.0);
}

std::string LimitText(const MemoryLimit& limit) {
  if (limit.source.empty()) return "no known limit";
  return absl::StrFormat("%s available (%s)", BytesText(limit.bytes), limit.source);
}

}  // namespace dmalab

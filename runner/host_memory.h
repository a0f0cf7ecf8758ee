// The memory this process can give a run, for refusing work that cannot fit before allocating
// it: the simulator holds every rank's memory in this process, and an allocation past a limit
// ends in std::bad_alloc (an abort), not in a message.
#ifndef DMALAB_RUNNER_HOST_MEMORY_H_
#define DMALAB_RUNNER_HOST_MEMORY_H_

#include <cstdint>
#include <string>

namespace dmalab {

// The tightest of the limits on new allocations, and which one it is.
struct MemoryLimit {
  uint64_t bytes = UINT64_MAX;  // UINT64_MAX: no limit is known
  // "MemAvailable", "RLIMIT_AS (4294967296 bytes, 123456 mapped)", "cgroup
  // /sys/fs/cgroup/x (memory.max 1073741824 bytes, 123456 in use)", or "" when none is known.
  std::string source;
};

// The least of: the physical memory available without swapping (MemAvailable of
// /proc/meminfo, else free pages), RLIMIT_AS less the address space already mapped, RLIMIT_DATA
// less the data already mapped, and the memory limit of every cgroup this process is in, up to
// the root (v2 memory.max less memory.current; v1 memory.limit_in_bytes less
// memory.usage_in_bytes). The default memory limit of simulator runs (replay, demo, sweep, zoo).
MemoryLimit AvailableMemory();

// AvailableMemory().bytes.
uint64_t AvailableMemoryBytes();

// The cgroup part of AvailableMemory, with the file system rooted at `root` ("" for "/") and
// `proc_self_cgroup` the text of /proc/self/cgroup: for tests. The least limit left over every
// level of every hierarchy listed, or no limit.
MemoryLimit CgroupMemoryLimit(const std::string& root, const std::string& proc_self_cgroup);

// The least of `limit` and `bytes` (named `source`).
void Tighten(MemoryLimit& limit, uint64_t bytes, const std::string& source);

// "12884901888 bytes (12.0 GiB)".
std::string BytesText(uint64_t bytes);

// "12884901888 bytes (12.0 GiB) available (RLIMIT_AS ...)": a limit for messages.
std::string LimitText(const MemoryLimit& limit);

}  // namespace dmalab

#endif  // DMALAB_RUNNER_HOST_MEMORY_H_

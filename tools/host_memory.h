// The memory this host can give a run, for refusing work that cannot fit before allocating it.
#ifndef DMALAB_TOOLS_HOST_MEMORY_H_
#define DMALAB_TOOLS_HOST_MEMORY_H_

#include <cstdint>
#include <string>

namespace dmalab {

// Physical memory available to new allocations without swapping: MemAvailable of
// /proc/meminfo (Linux), else free pages times the page size, else UINT64_MAX (unknown: no
// check). The default memory limit of simulator runs (dmalab replay, dmalab demo).
uint64_t AvailableMemoryBytes();

// "12884901888 bytes (12.0 GiB)".
std::string BytesText(uint64_t bytes);

}  // namespace dmalab

#endif  // DMALAB_TOOLS_HOST_MEMORY_H_

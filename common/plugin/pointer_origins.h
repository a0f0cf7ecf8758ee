// PointerOrigins: which allocation a raw address a plugin passes back came from. Real
// collectives keep void* tables, not dmalab's allocation ids; a range with alloc_id 0 is
// resolved to the last range dmalab handed the plugin that covers it (an allocation it made, a
// call's tensor, a result), so a pointer kept past its allocation's free is still checked
// against that allocation, not against whatever tensor now lives at the address. A range inside
// an IPC mapping resolves to that mapping (its number, MemRef::via_mapping): devices that know
// mappings by number (CUDA) then check it against the mapping, not the rank's own allocations.
#ifndef DMALAB_COMMON_PLUGIN_POINTER_ORIGINS_H_
#define DMALAB_COMMON_PLUGIN_POINTER_ORIGINS_H_

#include <cstdint>
#include <map>

#include "dmalab/tensor.h"

namespace dmalab {

class PointerOrigins {
 public:
  // dmalab handed the plugin `m` (with its allocation id or mapping number): it replaces any
  // older origin of the bytes it covers. Ranges with neither are not recorded.
  void Handed(const MemRef& m);
  // `m` with the allocation id and mapping number of its origin when it has neither and one
  // origin covers it whole.
  MemRef Resolve(MemRef m) const;
  // Ranges kept (memory stays proportional to the distinct live ranges handed out).
  size_t size() const { return ranges_.size(); }

 private:
  struct Range {
    uint64_t end;
    uint64_t alloc_id;
    uint64_t via_mapping;
  };
  std::map<std::pair<int, uint64_t>, Range> ranges_;  // (rank, start) -> range, disjoint
};

}  // namespace dmalab

#endif  // DMALAB_COMMON_PLUGIN_POINTER_ORIGINS_H_

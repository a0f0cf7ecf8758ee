// What a device's own checker found (SimDevice: races, use after free or reuse, out of bounds,
// deadlocks), in a form every layer above can read without re-parsing text: the checker, the
// rank and bytes concerned, the allocation, the operations involved and the sentence.
#ifndef DMALAB_DEVICE_FINDING_H_
#define DMALAB_DEVICE_FINDING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "dmalab/tensor.h"

namespace dmalab {

// An operation a finding involves.
struct FindingOp {
  int rank = -1;       // -1: the host
  std::string stream;  // the stream's name; empty for the host
  std::string label;   // the operation's label ("all_reduce#2 rs.k0.p0 copy")
  std::string access;  // "read", "write" or "" (deadlocks: the waiting operation)
};

struct DeviceFinding {
  std::string checker;    // "race", "use-after-free", "use-after-reuse", "out-of-bounds", ...
  int rank = -1;          // the rank whose memory (deadlock: whose stream) it concerns
  MemRef mem;             // the bytes concerned; bytes == 0 when none (deadlock)
  std::string alloc_tag;  // the tag of the allocation holding them; empty when none
  std::vector<FindingOp> ops;
  std::string detail;  // the whole finding in words, without the checker's name
};

// What stays the same when one bug shows on several ranks, calls or iterations: the checker,
// the allocation tag, and each operation's stream, label and access with call numbers
// ("all_reduce#12") and addresses left out. Two findings with the same signature at the same
// scenario step are one distinct finding in a grouped report.
std::string DeviceFindingSignature(const DeviceFinding& f);

// The findings a device reported since the last poll, and how many more it counted but did not
// keep (a device may keep only the first few of each kind).
struct DeviceFindings {
  std::vector<DeviceFinding> findings;
  int64_t not_kept = 0;
};

}  // namespace dmalab

#endif  // DMALAB_DEVICE_FINDING_H_

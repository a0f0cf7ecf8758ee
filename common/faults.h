// Named fault injections: deliberate bugs from real incidents, off by default, so the testbed
// can show that its checkers catch them. They never change the default path.
#ifndef DMALAB_COMMON_FAULTS_H_
#define DMALAB_COMMON_FAULTS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace dmalab {

enum class Fault {
  // Default outputs become views at byte 0 of one channel-owned workspace (the founding
  // incident).
  kPersistentOutput,
  // A reduce-scatter add does not wait for the copy it consumes.
  kDropCopyWait,
  // No end-of-call neighbour handshake: a faster neighbour may overwrite scratch.
  kSkipEndHandshake,
};

// "persistent-output", "drop-copy-wait", "skip-end-handshake".
std::string_view FaultName(Fault f);
// Every fault, in declaration order.
const std::vector<Fault>& AllFaults();

// A set of injected faults.
class FaultSet {
 public:
  FaultSet() = default;
  // Parses a comma-separated list of names; an empty string or "none" is the empty set.
  static absl::StatusOr<FaultSet> Parse(std::string_view names);

  FaultSet& Add(Fault f) {
    bits_ |= 1u << static_cast<int>(f);
    return *this;
  }
  bool Has(Fault f) const { return (bits_ >> static_cast<int>(f)) & 1u; }
  bool empty() const { return bits_ == 0; }
  // Comma-separated names, or "none".
  std::string ToString() const;

 private:
  unsigned bits_ = 0;
};

}  // namespace dmalab

#endif  // DMALAB_COMMON_FAULTS_H_

// Named fault injections: deliberate bugs from real incidents, off by default, so the testbed
// can show that its checkers catch them. They never change the default path.
#ifndef DMALAB_FAULTS_H_
#define DMALAB_FAULTS_H_

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
  // The call returns before its sends finished: its exit joins neither the send stream nor the
  // flag stream (which waits for the sends) into the compute stream, nor waits for the
  // successor's handshake, so the caller's next write to the tensor (in place) or free of the
  // result races with the rank's own still-running send copies.
  kEarlyReturn,
  // The all-gather reuses the reduce-scatter's scratch slots (slot g, not w-1+g), as if the
  // receiver's "ready" flag meant "consumed": a fast sender overwrites a partial that the
  // receiver has not yet added.
  kFlagReadyNotConsumed,
  // The explicit form keeps writing the output it was first called with for an input, as a
  // captured graph does, after the caller freed that output and passes another one.
  kGraphOutputFreed,
  // In place only: the all-gather forwards each received chunk from the output (aliased with
  // the input) instead of its scratch slot, without waiting for the place copy that fills it.
  // W=2 has a single all-gather step that forwards the rank's own chunk, so only 3+ ranks break.
  kInplaceAliasRing,
  // Compressed wire modes: the owner keeps its unquantized chunk instead of decoding its output
  // from the payload it forwards, so ranks differ by a rounding.
  kOwnerKeepsPrequant,
};

// "persistent-output", "drop-copy-wait", "skip-end-handshake", "early-return",
// "flag-ready-not-consumed", "graph-output-freed", "inplace-alias-ring", "owner-keeps-prequant".
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

#endif  // DMALAB_FAULTS_H_

// A checker's finding: which invariant broke, in words that name both operations involved
// (rank, stream, plan step) and the allocation.
#ifndef DMALAB_SIM_FINDING_H_
#define DMALAB_SIM_FINDING_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dmalab/device_finding.h"

namespace dmalab {

enum class FindingKind {
  kRace,
  kUseAfterFree,
  kUseAfterReuse,
  kOutOfBounds,
  kDeadlock,
  kShadowUnknownWord,  // shadow fidelity: a flag load from a word whose value it cannot know
  kForeignAddress,     // a rank used another rank's raw address as its own (no IPC mapping)
  kStaleIpcMapping,    // an IPC mapping opened or used after the exporter freed the allocation
                       // (or after the opener closed it)
  kUnmappedAddress,    // work reached a reserved address range where nothing was mapped
                       // (keep last: FindingLog::kKinds counts up to it)
};

std::string_view FindingKindName(FindingKind kind);

struct Finding {
  FindingKind kind = FindingKind::kRace;
  std::string message;  // the whole finding in words
  // The same facts, typed: rank, bytes, allocation tag, operations (DeviceFinding).
  int rank = -1;
  MemRef mem;
  std::string alloc_tag;
  std::vector<FindingOp> ops;

  // As the device-independent DeviceFinding (checker: FindingKindName(kind)).
  DeviceFinding ToDeviceFinding() const;
};

// Collects findings, keeping the first `limit` of each kind and counting the rest, so a
// broken run reports quickly and deterministically.
class FindingLog {
 public:
  void Add(Finding finding);
  void Add(FindingKind kind, std::string message) {
    Finding f;
    f.kind = kind;
    f.message = std::move(message);
    Add(std::move(f));
  }
  const std::vector<Finding>& findings() const { return findings_; }
  int Count(FindingKind kind) const { return counts_[static_cast<int>(kind)]; }
  bool empty() const { return findings_.empty(); }
  // Every finding added, kept or not.
  int64_t total() const;
  void Clear();
  // One line per finding, the first kPrintPerKind of each kind, plus a line per kind with
  // findings not shown; byte-identical for the same run.
  std::string ToString() const;

  // Findings kept per kind (memory stays bounded however broken a run is); later ones are
  // counted only.
  static constexpr int kLimitPerKind = 1000;
  static constexpr int kPrintPerKind = 20;

 private:
  std::vector<Finding> findings_;
  static constexpr int kKinds = static_cast<int>(FindingKind::kUnmappedAddress) + 1;
  int counts_[kKinds] = {};
};

}  // namespace dmalab

#endif  // DMALAB_SIM_FINDING_H_

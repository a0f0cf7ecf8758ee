// A checker's finding: which invariant broke, in words that name both operations involved
// (rank, stream, plan step) and the allocation.
#ifndef DMALAB_SIM_FINDING_H_
#define DMALAB_SIM_FINDING_H_

#include <string>
#include <vector>

namespace dmalab {

enum class FindingKind {
  kRace,
  kUseAfterFree,
  kUseAfterReuse,
  kOutOfBounds,
  kDeadlock,
  kShadowUnknownWord,  // shadow fidelity: a flag load from a word whose value it cannot know
};

std::string_view FindingKindName(FindingKind kind);

struct Finding {
  FindingKind kind;
  std::string message;
};

// Collects findings, keeping the first `limit` of each kind and counting the rest, so a
// broken run reports quickly and deterministically.
class FindingLog {
 public:
  void Add(FindingKind kind, std::string message);
  const std::vector<Finding>& findings() const { return findings_; }
  int Count(FindingKind kind) const { return counts_[static_cast<int>(kind)]; }
  bool empty() const { return findings_.empty(); }
  void Clear();
  // One line per finding plus a line per kind with suppressed findings; byte-identical for
  // the same run.
  std::string ToString() const;

  static constexpr int kLimitPerKind = 20;

 private:
  std::vector<Finding> findings_;
  int counts_[6] = {};
};

}  // namespace dmalab

#endif  // DMALAB_SIM_FINDING_H_

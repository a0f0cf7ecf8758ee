// The replay engine: executes a Scenario on any Device through any Collective (the built-in DMA
// ring by default, or a plugin: common/plugin/open_collective.h) and checks, after
// every step, the invariants a transformer relies on (DESIGN.md sections 1 and 5):
//   - retained values: every retained tensor is compared, element by element on every rank,
//     with the snapshot taken when it was retained;
//   - no pointer alias: no two live tensors share a byte of storage on any rank (byte intervals,
//     not start addresses);
//   - rank consistency: after every all_reduce all ranks' outputs are bit-identical;
//   - frees succeed: releasing a default-form result returns an allocation of its own.
// Any violation is a ReplayFinding and makes the verdict FAIL. The same scenario replays unchanged
// on SimDevice and CudaDevice; the output hash of each all-reduce (common/core/hash.h) is computed
// from the bytes read back, so it compares across devices. On a shadow device (no payload) the same
// checks compare provenance instead of bytes.
#ifndef DMALAB_COMMON_SCENARIO_REPLAY_H_
#define DMALAB_COMMON_SCENARIO_REPLAY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/core/device.h"
#include "common/core/device_finding.h"
#include "common/core/tensor.h"
#include "common/ring/faults.h"
#include "common/scenario/scenario.h"

namespace dmalab {

struct ReplayOptions {
  // The collective under test: "ring" (the built-in DMA ring) or a plugin's shared library
  // (common/plugin/open_collective.h), with its options text.
  std::string collective = "ring";
  std::string collective_options;
  FaultSet faults;               // injected into DmaAllReduce
  std::optional<uint64_t> seed;  // replaces the scenario's seed (fill contents) when set
  int pieces = 2;                // DmaAllReduceOptions::pieces
  int max_findings = 64;         // findings kept in the report; later ones are only counted
  // Optional: polled after every step for what the device's own checkers found since the last
  // poll (SimDevice: races, use after free or reuse, deadlocks; NewFindingsPoller). Each becomes
  // a kDeviceChecker finding of that step, with the device's checker, rank and storage.
  std::function<DeviceFindings()> poll_device_findings;
  // Optional: progress of a run, for a display. Called with (0, total) before the first step,
  // then after every executed step with (steps done, total); total is the expanded step count
  // (Scenario::ExpandedStepCount). Called often: keep it cheap and throttle any output.
  std::function<void(int64_t done, int64_t total)> progress;
  // Optional: called after the last step for every tensor still live (name, one view per rank),
  // before the replay frees them; an error ends the replay with that error.
  std::function<absl::Status(const std::string&, const std::vector<TensorView>&)> inspect_at_end;
};

enum class ReplayFindingKind {
  kPointerAlias,      // two live tensors overlap on a rank
  kRetainedMismatch,  // a retained tensor's bits changed on a rank
  kRankInconsistent,  // an all-reduce output differs from rank 0's on a rank
  kExpectEqual,       // expect_equal found differing elements on a rank
  kFreeFailed,        // Device::Free refused a released tensor's storage
  kDeviceError,       // the device failed while executing; the replay stopped
  kDeviceChecker,     // the device's own checker reported something (poll_device_findings)
  kCollectiveError,   // the collective broke its contract (e.g. freed memory it does not own);
                      // the replay stopped
};

// "pointer_alias", "retained_mismatch", "rank_inconsistent", "expect_equal", "free_failed",
// "device_error", "device_checker", "collective_error".
std::string_view ReplayFindingKindName(ReplayFindingKind kind);

// Storage a finding involves: a tensor's view on one rank.
struct StorageRef {
  std::string tensor;
  MemRef mem;
};

struct ReplayFinding {
  ReplayFindingKind kind = ReplayFindingKind::kDeviceError;
  // The check that found it: the device checker's name for kDeviceChecker ("race",
  // "use-after-free", ...), else ReplayFindingKindName(kind).
  std::string checker;
  int64_t step_index = 0;  // 1-based ordinal among executed steps; 0 after the last step
  std::string step;        // Step::Describe(), with repeat iterations
  std::string step_desc;   // Step::Describe() alone ("end of scenario" after the last step)
  std::string step_id;     // the step's place in the file (Step::path), the same every iteration
  // Repeats: the iteration, 1-based and counted over all enclosing repeats in execution order,
  // and how many there are; 0 and 0 outside repeats.
  int64_t iteration = 0;
  int64_t iterations = 0;
  int rank = 0;
  std::vector<StorageRef> storage;  // device findings: the allocation (tag) and bytes, if any
  std::vector<FindingOp> ops;       // device findings: the operations involved
  int64_t elems = 0;                // elements affected (mismatches), where that applies
  int64_t of_elems = 0;             // elements compared
  std::string detail;
  // What is the same when this bug shows on another rank or iteration (checker, tensors or
  // allocation tag, operations without call numbers); with step_id it groups findings.
  std::string signature;
};

// One distinct finding: every finding of one step (all iterations) with one signature.
struct FindingGroup {
  ReplayFinding first;     // the first occurrence, in full
  int64_t count = 0;       // occurrences
  std::vector<int> ranks;  // sorted, distinct
  // Iterations covered, as sorted inclusive ranges [a, b] (1-based); empty outside repeats.
  // At most kMaxRanges are kept; iteration_ranges_truncated says more were seen.
  std::vector<std::pair<int64_t, int64_t>> iteration_ranges;
  bool iteration_ranges_truncated = false;
  static constexpr size_t kMaxRanges = 64;
};

struct AllReduceRecord {
  int64_t step_index = 0;
  std::string step;
  std::string input;
  std::string output;  // the result, out or (in place) input tensor
  AllReduceForm form = AllReduceForm::kDefault;
  int64_t elems = 0;
  uint64_t bytes = 0;
  // Values devices: Xxh64 of rank 0's output bytes. Shadow devices: ProvenanceDigest of its
  // provenance (common/core/provenance.h).
  uint64_t hash = 0;
  bool rank_consistent = true;
};

struct ReplayReport {
  std::string scenario;
  std::string file;
  std::string device;
  std::string collective;  // Collective::name() of the collective under test
  // "values" or "shadow" (Device::HoldsValues). In the shadow fidelity every comparison is of
  // provenance: an element counts as changed, or as differing between ranks, when its provenance
  // differs (an upper bound of what values would show; common/core/provenance.h).
  std::string fidelity = "values";
  int world = 0;
  std::string wire;
  std::string faults;  // FaultSet::ToString()
  uint64_t seed = 0;   // the fill seed (the scenario's unless ReplayOptions::seed)
  int64_t steps_executed = 0;
  std::vector<AllReduceRecord> all_reduces;

  std::vector<ReplayFinding> findings;  // the first ReplayOptions::max_findings
  int64_t findings_total = 0;  // every finding, including device findings the device did not keep
  // Distinct findings in order of first occurrence: the first kMaxGroups; later distinct ones
  // are counted in groups_not_kept.
  std::vector<FindingGroup> groups;
  int64_t groups_not_kept = 0;
  static constexpr size_t kMaxGroups = 256;
  // Device findings counted but not kept by the device (SimDevice keeps 20 of each kind).
  int64_t device_findings_not_kept = 0;
  // The simulator's scheduling seed, set by whoever made the device; unset on other devices.
  std::optional<uint64_t> scheduling_seed;

  bool pointer_alias = false;
  // Retained-value summary: for each retention (a retain step and the tensor it names), the most
  // elements found changed at any check, summed over retentions; `retained_rank`'s count is the
  // headline, every rank's is kept too. retained_elems sums the retentions' element counts (one
  // rank).
  int retained_rank = 0;
  int64_t retained_mismatches = 0;
  int64_t retained_elems = 0;
  std::vector<int64_t> retained_mismatches_by_rank;
  bool rank_consistent = true;

  // PASS iff there are no findings.
  bool pass() const { return findings_total == 0; }
};

// Replays `scenario` on `device`, whose world size must equal the scenario's. Returns an error
// (bad input: exit status 2 in tools) when the scenario cannot run on this device or an
// all-reduce call rejects its arguments; failures while executing are findings in the report.
absl::StatusOr<ReplayReport> Replay(const Scenario& scenario, Device* device,
                                    const ReplayOptions& options);

}  // namespace dmalab

#endif  // DMALAB_COMMON_SCENARIO_REPLAY_H_

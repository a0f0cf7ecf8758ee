// The replay engine: executes a Scenario on any Device through any Collective (the built-in DMA
// ring by default, or a plugin: common/plugin/open_collective.h) and checks, after
// every step, the invariants a transformer relies on (docs/design.md sections 1 and 5):
//   - retained values: every retained tensor is compared, element by element on every rank,
//     with the snapshot taken when it was retained;
//   - no pointer alias: no two live tensors share a byte of storage on any rank (byte intervals,
//     not start addresses);
//   - rank consistency: after every all_reduce all ranks' outputs are bit-identical;
//   - values: an all-reduce output whose exact value the steps determine (integer fills whose
//     sums are exact in the dtype) equals it on every rank, and one from finite inputs holds no
//     NaN or infinity (common/scenario/known_values.h; devices with values only);
//   - frees succeed: releasing a default-form result returns an allocation of its own.
// Any violation is a ReplayFinding and makes the verdict FAIL. The same scenario replays unchanged
// on SimDevice and CudaDevice; the output hash of each all-reduce (common/core/hash.h) is computed
// from the bytes read back, so it compares across devices. On a shadow device (no payload) the same
// checks compare provenance instead of bytes.
#ifndef DMALAB_REPLAY_H_
#define DMALAB_REPLAY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "dmalab/device.h"
#include "dmalab/device_finding.h"
#include "dmalab/faults.h"
#include "dmalab/scenario.h"
#include "dmalab/tensor.h"

namespace dmalab {

// The default bound on the steps of one replay (ReplayOptions::max_steps): 10^7 steps, hours of
// values-fidelity replay; the shipped scenarios take a few hundred.
inline constexpr int64_t kDefaultMaxReplaySteps = 10000000;

struct ReplayReport;
// One rank's process of a launch of one process per rank (dmalab's own, in the dmalab_plugin
// library): set only by dmalab's rank processes.
class SpmdProcess;

// Where a replay is: a step, or a phase around the steps. Given to ReplayOptions::observer, so a
// caller can name the step that never ended (a crash or a hang of the collective under test).
struct ReplayStepPlace {
  int64_t step_index = 0;  // 1-based ordinal of the step; 0 for a phase
  std::string step;        // Step::Describe() with repeat iterations, or the phase
  std::string step_desc;   // Step::Describe(), or the phase
  std::string step_id;     // Step::path, or "setup", "end"
  int64_t iteration = 0;   // as ReplayFinding's
  int64_t iterations = 0;
};

// Follows a replay: see ReplayOptions::observer.
using ReplayObserver = std::function<void(const ReplayStepPlace& next, const ReplayReport& so_far)>;

struct ReplayOptions {
  // The collective under test: "ring" (the built-in DMA ring) or a plugin's shared library
  // (common/plugin/open_collective.h), with its options text.
  std::string collective = "ring";
  std::string collective_options;
  // Set where this process runs one rank of the device's W (one process per rank): a plugin's
  // instance of that rank runs here (CollectiveParams::process).
  SpmdProcess* spmd_process = nullptr;
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
  // Optional: called before every step and every phase ("setup": loading and creating the
  // collective; "end of scenario": freeing what is live; "end of scenario (destroying the
  // collective)") with where the replay goes next and the report of everything before it, so
  // that a report survives a collective that never returns (runner/isolated_replay.h).
  ReplayObserver observer;

  // Bound on work: a scenario whose step count, repeats expanded and every repeat iteration
  // counting as one step at least (Scenario::ExpandedWork, computed before anything runs,
  // saturating instead of overflowing), exceeds max_steps is refused as bad input. 0: no bound.
  int64_t max_steps = kDefaultMaxReplaySteps;
  // Bound on memory, bytes: when > 0 and the device holds values, a scenario whose
  // EstimateReplayMemory(...).Total() exceeds it is refused as bad input before anything is
  // allocated. Meant for the simulator, which holds every rank's memory in this process (dmalab
  // replay sets it to the available physical memory). 0: no check.
  uint64_t max_memory_bytes = 0;
  // What max_memory_bytes is, named in the refusal ("MemAvailable", "RLIMIT_AS (...)"); optional.
  std::string max_memory_source;
  // All-reduce records kept in the report (ReplayReport::all_reduces); later ones are only
  // counted, so memory stays flat in the number of calls.
  int64_t max_all_reduce_records = 10000;
};

// The memory a values-fidelity replay of a scenario needs, computed from the scenario alone.
struct ReplayMemoryNeed {
  int world = 0;
  uint64_t tensor_bytes_per_rank = 0;     // peak over the steps of the live tensors' bytes
  uint64_t workspace_bytes_per_rank = 0;  // the all-reduce's slab and staging (DmaAllReduce)
  // Snapshots of retained tensors (every rank), read buffers and an output's exact values.
  uint64_t host_bytes = 0;

  uint64_t PerRank() const { return tensor_bytes_per_rank + workspace_bytes_per_rank; }
  // Everything, as the simulator holds it: every rank's memory and the host's, in one process.
  // Saturates at UINT64_MAX.
  uint64_t Total() const;
};
ReplayMemoryNeed EstimateReplayMemory(const Scenario& scenario, const ReplayOptions& options);

enum class ReplayFindingKind {
  kPointerAlias,      // two live tensors overlap on a rank
  kRetainedMismatch,  // a retained tensor's bits changed on a rank
  kRankInconsistent,  // an all-reduce output differs from rank 0's on a rank
  kExpectEqual,       // expect_equal found differing elements on a rank
  kWrongSum,          // an all-reduce of exact integers differs from their exact sum on a rank
  kNonFinite,         // an all-reduce output holds NaN or infinity from finite inputs on a rank
  kFreeFailed,        // Device::Free refused a released tensor's storage
  kDeviceError,       // the device failed while executing; the replay stopped
  kDeviceChecker,     // the device's own checker reported something (poll_device_findings)
  kCollectiveError,   // the collective broke its contract (e.g. freed memory it does not own)
                      // or a plugin's call failed; the replay stopped
  kCollectiveCrash,   // the collective's process died (a signal) or exited during a step
                      // (runner/isolated_replay.h); the replay stopped there
  kCollectiveHang,    // a step of the collective did not end within the hang bound; the replay
                      // was stopped there
};

// "pointer_alias", "retained_mismatch", "rank_inconsistent", "expect_equal", "wrong_sum",
// "non_finite", "free_failed", "device_error", "device_checker", "collective_error",
// "collective_crash", "collective_hang".
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
  // provenance (include/dmalab/provenance.h).
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
  // differs (an upper bound of what values would show; include/dmalab/provenance.h).
  std::string fidelity = "values";
  int world = 0;
  std::string wire;
  std::string faults;  // FaultSet::ToString()
  uint64_t seed = 0;   // the fill seed (the scenario's unless ReplayOptions::seed)
  int64_t steps_executed = 0;
  std::vector<AllReduceRecord> all_reduces;  // the first ReplayOptions::max_all_reduce_records
  int64_t all_reduces_total = 0;

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
  // On GPUs: the schedule perturbation's seed (measure/perturbing_device.h), set by whoever made
  // the device; unset when the run was not perturbed.
  std::optional<uint64_t> perturb_seed;

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

// Whether an error of an all-reduce call is the call rejecting its arguments (InvalidArgument,
// FailedPrecondition: DmaAllReduce's validation), which is bad input. Every other error of the
// call (DeadlineExceeded from a flag wait that timed out, Internal or Unavailable from the
// device, ...) is the collective under test failing while it executes: a finding.
bool IsRejectedArguments(const absl::Status& status);

// Whether a failed call of `collective` (ReplayOptions::collective) is bad input: only the
// built-in ring refusing its arguments (IsRejectedArguments), whose rules dmalab documents. A
// plugin's call that fails, whatever it says, is the collective under test failing on input the
// scenario format allows: a collective_error finding (exit status 1).
bool IsCollectiveCallBadInput(const absl::Status& status, std::string_view collective);

// The finding a failed call of `collective` is when it is not bad input: kCollectiveError for a
// broken contract (Aborted) or any failing call of a plugin, kDeviceError otherwise (a flag wait
// that timed out, a device error while the ring ran).
ReplayFindingKind CollectiveCallFailureKind(const absl::Status& status,
                                            std::string_view collective);

// Rebuilds report.groups (and groups_not_kept) from report.findings, as Replay groups them: for a
// report assembled outside Replay (the PyTorch harness, python/dmalab/torch). A finding without
// a checker gets ReplayFindingKindName(kind); without a step_id, it groups by step_index.
void GroupFindings(ReplayReport& report);

// The bound on work Replay applies first (ReplayOptions::max_steps, 0: none): InvalidArgument
// naming the file, the work found (Scenario::ExpandedWork) and the bound. For other replays of a
// scenario (the PyTorch harness), so that they refuse what Replay refuses, in the same words.
absl::Status CheckReplayWork(const Scenario& scenario, int64_t max_steps = kDefaultMaxReplaySteps);

// Adds one finding to a report as Replay adds its own: counted, grouped with the findings of its
// step and signature, kept while fewer than `max_findings` are (ReplayOptions::max_findings).
void AddFindingTo(ReplayReport& report, ReplayFinding finding, int max_findings = 64);

// Replays `scenario` on `device`, whose world size must equal the scenario's. Returns an error
// (bad input: exit status 2 in tools) when the scenario cannot run on this device, exceeds
// max_steps or max_memory_bytes, the collective cannot be made, or the ring rejects an
// all-reduce's arguments (IsCollectiveCallBadInput). Failures while executing, a timeout or
// device error of an all-reduce call or a plugin's failing call included, are findings in the
// report (kDeviceError, kCollectiveError: the replay stops there; FAIL).
absl::StatusOr<ReplayReport> Replay(const Scenario& scenario, Device* device,
                                    const ReplayOptions& options);

}  // namespace dmalab

#endif  // DMALAB_REPLAY_H_

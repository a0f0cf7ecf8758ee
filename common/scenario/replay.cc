#include "dmalab/replay.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <set>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/core/hash.h"
#include "common/core/host_buffer.h"
#include "common/core/resource_growth.h"
#include "common/core/result_checks.h"
#include "common/core/status_macros.h"
#include "common/plugin/open_collective.h"
#include "common/ring/dma_all_reduce.h"
#include "common/scenario/enum_names.h"
#include "common/scenario/fill.h"
#include "common/scenario/known_values.h"
#include "common/scenario/replay_checks.h"
#include "dmalab/provenance.h"

namespace dmalab {

std::string_view ReplayFindingKindName(ReplayFindingKind kind) {
  return kReplayFindingKinds.Name(kind);
}

namespace {

// A live tensor: its view on every rank and what to hand back to Device::Free.
struct LiveTensor {
  const TensorDecl* decl = nullptr;
  std::vector<TensorView> views;
  std::vector<MemRef> allocations;
  // The ranks it is live on: all, unless a step with `ranks:` freed it on some (their views and
  // allocations are then empty) or made it live on some only.
  std::vector<bool> on;
  std::string origin;  // the step that made it live
  KnownValues known;   // what its values are, as far as the steps say (known_values.h)
};

// What a buffer holds, as far as the device can say: its bytes (values devices) or its
// provenance (shadow devices).
struct Contents {
  HostBytes bytes;
  Provenance provenance;
};

// A fill's bytes, any piece of them generated alone (FillElements): written with
// Device::WriteGenerated, so a device that can produces them only where they are read.
class FillContent : public GeneratedContent {
 public:
  FillContent(DType dtype, FillKind kind, double lo, double hi, uint64_t key)
      : dtype_(dtype), kind_(kind), lo_(lo), hi_(hi), key_(key) {}
  uint64_t grain() const override { return static_cast<uint64_t>(DTypeBytes(dtype_)); }
  void Generate(uint64_t offset, absl::Span<uint8_t> out) const override {
    FillElements(dtype_, kind_, lo_, hi_, key_, static_cast<int64_t>(offset / grain()), out);
  }

 private:
  DType dtype_;
  FillKind kind_;
  double lo_, hi_;
  uint64_t key_;
};

// A retained value: the snapshot of every rank and the most elements seen changed per rank.
struct Retention {
  std::string origin;
  // By rank. Ranks whose bytes are equal share one snapshot: a retained all-reduce output is
  // usually the same on every rank, and one copy costs a quarter of the host memory of four.
  std::vector<std::shared_ptr<Contents>> snapshot;
  std::vector<int64_t> max_changed;
};

// An all-reduce inside a captured graph: checked after every launch while its output is still
// the storage it was captured with.
struct CapturedAllReduce {
  std::string step;  // the all_reduce step's description
  std::string input, output;
  AllReduceForm form = AllReduceForm::kOut;
  std::vector<MemRef> output_mems;
};

// A step inside a captured graph (an add or an all-reduce), applied to the known values at every
// launch, while its tensors are still the storage captured.
struct CapturedEffect {
  const Step* step = nullptr;
  std::vector<std::pair<std::string, std::vector<MemRef>>> tensors;  // operands and destination
};

struct CapturedGraph {
  GraphId id;
  std::vector<CapturedAllReduce> all_reduces;
  std::vector<CapturedEffect> effects;  // in capture order
};

// A device failure, carried out of a step to stop the replay with a finding.
struct DeviceFailure {
  absl::Status status;
};

// What groups findings: the step's place in the file, or without one (findings assembled
// outside Replay) the step's ordinal, and the signature.
std::string GroupKey(const ReplayFinding& f) {
  return f.step_id.empty() ? absl::StrCat("#", f.step_index, "|", f.signature)
                           : absl::StrCat(f.step_id, "|", f.signature);
}

// Adds `f` to its group in r.groups (group_of: step_id + signature -> index), a new group while
// fewer than kMaxGroups exist, else counts it in groups_not_kept. Fills an empty signature from
// the checker and the tensors.
void AddToGroups(ReplayReport& r, std::map<std::string, size_t>& group_of, ReplayFinding& f) {
  if (f.checker.empty()) f.checker = std::string(ReplayFindingKindName(f.kind));
  if (f.step_desc.empty()) f.step_desc = f.step;
  if (f.signature.empty()) {  // the replay's own checks: the check and the tensors it names
    f.signature = f.checker;
    for (const StorageRef& s : f.storage) absl::StrAppend(&f.signature, "|", s.tensor);
    // A failure of the collective or the device says what failed where (a rank that hung, the
    // ranks that timed out waiting for it): each is its own finding.
    if (f.kind == ReplayFindingKind::kDeviceError ||
        f.kind == ReplayFindingKind::kCollectiveError ||
        f.kind == ReplayFindingKind::kCollectiveCrash ||
        f.kind == ReplayFindingKind::kCollectiveHang) {
      absl::StrAppend(&f.signature, "|", f.detail);
    }
  }
  const std::string key = GroupKey(f);
  auto it = group_of.find(key);
  if (it == group_of.end() && r.groups.size() >= ReplayReport::kMaxGroups) {
    ++r.groups_not_kept;
    return;
  }
  if (it == group_of.end()) {
    it = group_of.emplace(key, r.groups.size()).first;
    FindingGroup g;
    g.first = f;
    r.groups.push_back(std::move(g));
  }
  FindingGroup& g = r.groups[it->second];
  ++g.count;
  if (!std::binary_search(g.ranks.begin(), g.ranks.end(), f.rank)) {
    g.ranks.insert(std::upper_bound(g.ranks.begin(), g.ranks.end(), f.rank), f.rank);
  }
  if (f.iteration > 0) {
    auto& ranges = g.iteration_ranges;
    if (!ranges.empty() && f.iteration >= ranges.back().first &&
        f.iteration <= ranges.back().second + 1) {
      ranges.back().second = std::max(ranges.back().second, f.iteration);
    } else if (ranges.size() < FindingGroup::kMaxRanges) {
      ranges.emplace_back(f.iteration, f.iteration);
    } else {
      g.iteration_ranges_truncated = true;
    }
  }
}

class Replayer {
 public:
  Replayer(const Scenario& s, Device* d, const ReplayOptions& o) : s_(s), d_(d), o_(o) {}

  absl::StatusOr<ReplayReport> Run();

 private:
  // Run without destroying the collective.
  absl::StatusOr<ReplayReport> RunSteps();
  void Observe(const ReplayStepPlace& next, const ReplayReport& so_far) const {
    if (o_.observer) o_.observer(next, so_far);
  }
  // OK, a bad-input error (returned from Replay) or a device failure (a finding).
  absl::Status Steps(const std::vector<Step>& steps);
  absl::Status One(const Step& step);
  absl::Status Fill(const Step& step);
  absl::Status AllReduce(const Step& step);
  // Allocations live on `rank` that no scenario tensor holds (-1: the device does not count).
  int64_t HeldByCollective(int rank) const;
  // A resource_growth finding for collectives that do not report their own.
  void CheckGrowth();
  std::vector<ResourceGrowth> growth_;
  absl::Status Add(const Step& step);
  absl::Status Retain(const Step& step);
  absl::Status ExpectEqual(const Step& step);
  absl::Status CaptureGraph(const Step& step);
  absl::Status LaunchGraph(const Step& step);
  // Hashes an all-reduce's output (rank 0's bytes), checks every rank against rank 0 and, where
  // its values are known (known_values.h), against them.
  absl::Status CheckOutput(AllReduceRecord rec, LiveTensor& out);
  // What `step` (an add or an all-reduce) leaves in its destination, from its operands' values.
  KnownValues KnownAfter(const Step& step) const;
  // Inside a capture: `step` changes its destination's values at every launch (LaunchGraph).
  void RecordEffect(const Step& step, const std::vector<std::string>& tensors);
  // The values of `name`, when live, are no longer what the steps say (it was found changed,
  // aliased or wrong): later checks must not blame its readers.
  void Forget(const std::string& name);
  // `name` by value: callers pass keys of live_, which Release erases (fuzzer-found).
  // `ranks` (ascending) empty: every rank it is live on.
  void Release(std::string name, bool at_end, const std::vector<int>& ranks = {});
  absl::Status VerifyRetained();
  absl::Status CheckBounds() const;
  void CheckAliases();
  void EndRetention(const std::string& name);
  void PollDeviceFindings();

  // The ranks `step` runs on, as a mask over the world.
  std::vector<bool> OnRanks(const Step& step) const {
    std::vector<bool> on(s_.world);
    for (int r = 0; r < s_.world; ++r) on[r] = step.OnRank(r);
    return on;
  }
  // Makes `name` live on the ranks `step` runs on where it is not yet.
  absl::Status MakeLive(const std::string& name, const Step& step);
  absl::Status ReadInto(const TensorView& view, Contents* out);
  int64_t CountChanged(const Contents& a, const Contents& b, DType dtype, int64_t* first) const;
  // "first at N: 1 -> 2" (values) or "first at N" (shadow) for a finding's detail.
  std::string FirstChange(const Contents& was, const Contents& now, DType dtype,
                          int64_t first) const;
  void AddFinding(ReplayFinding f);
  ReplayFinding NewFinding(ReplayFindingKind kind, int rank) const;
  // Records a device failure, which stops the replay and becomes a finding.
  absl::Status Failed(absl::Status s) {
    device_failure_ = s;
    return s;
  }
  // Records a broken contract of the collective, which stops the replay and becomes a finding.
  absl::Status CollectiveFailed(absl::Status s) {
    failure_kind_ = ReplayFindingKind::kCollectiveError;
    return Failed(std::move(s));
  }

  const Scenario& s_;
  Device* d_;
  const ReplayOptions& o_;
  uint64_t seed_ = 0;
  std::unique_ptr<Collective> ar_;
  ReplayReport r_;
  std::map<std::string, LiveTensor> live_;
  std::map<std::string, Retention> retained_;
  std::set<std::pair<std::string, std::string>> reported_aliases_;
  std::vector<std::pair<int64_t, int64_t>> iterations_;  // (current, times) of enclosing repeats
  std::string step_text_;                                // Describe() and the iteration
  std::string step_desc_;                                // Describe()
  std::string step_id_;                                  // Step::path
  int64_t iteration_ = 0, iterations_total_ = 0;
  int64_t total_steps_ = 0;
  std::map<std::string, size_t> group_of_;  // step_id + signature -> index in r_.groups
  bool values_ = true;                      // the device holds values (else provenance only)
  Contents buf_, buf0_;
  // A piece of an output's exact values (CheckOutput), kExactChunk elements at most: computed a
  // piece at a time, so that they stay in cache and cost no memory of the tensor's size.
  std::vector<int64_t> expected_;
  // A piece of an output's exact values in its dtype, when exact there (EncodeKnown).
  HostBytes expected_bytes_;
  // Elements [first, first + elems) of `rank`'s exact values into expected_bytes_.
  absl::Status EncodeKnown(const KnownValues& known, int rank, DType dtype, int64_t first,
                           int64_t elems);
  std::vector<Contents> snapshot_pool_;
  std::map<std::string, CapturedGraph> graphs_;
  CapturedGraph* capturing_ = nullptr;  // the graph a capture_graph step is recording
  absl::Status device_failure_;
  ReplayFindingKind failure_kind_ = ReplayFindingKind::kDeviceError;
};

// Peak live and retained bytes per rank over the steps, repeats walked until their effect on
// the live set repeats (at most twice: an iteration leaves every tensor it touches in the state
// its last step gives it).
class MemoryWalk {
 public:
  explicit MemoryWalk(const Scenario& s) : s_(s) {}
  void Walk(const std::vector<Step>& steps) {
    for (const Step& step : steps) {
      switch (step.kind) {
        case StepKind::kFill:
          live_.insert(step.tensor);
          break;
        case StepKind::kAdd:
          live_.insert(step.dst);
          break;
        case StepKind::kAllReduce:
          if (step.form == AllReduceForm::kDefault) live_.insert(step.result);
          break;
        case StepKind::kRetain:
          retained_.insert(step.tensor);
          break;
        case StepKind::kUnretain:
          retained_.erase(step.tensor);
          break;
        case StepKind::kRelease:
          if (step.ranks.empty()) live_.erase(step.tensor);  // else: counted until fully freed
          retained_.erase(step.tensor);
          break;
        case StepKind::kRepeat:
          for (int64_t i = 0; i < std::min<int64_t>(step.times, 2); ++i) Walk(step.body);
          break;
        case StepKind::kExpectUnchanged:
        case StepKind::kExpectEqual:
        case StepKind::kCaptureGraph:  // a graph allocates nothing
        case StepKind::kLaunchGraph:
          break;
      }
      peak_live_ = std::max(peak_live_, Bytes(live_));
      peak_retained_ = std::max(peak_retained_, Bytes(retained_));
    }
  }
  uint64_t peak_live() const { return peak_live_; }
  uint64_t peak_retained() const { return peak_retained_; }

 private:
  uint64_t Bytes(const std::set<std::string>& names) const {
    uint64_t b = 0;
    for (const std::string& n : names) b += s_.FindTensor(n)->bytes();
    return b;
  }
  const Scenario& s_;
  std::set<std::string> live_, retained_;
  uint64_t peak_live_ = 0, peak_retained_ = 0;
};

// a * b + c, saturating.
uint64_t MulAdd(uint64_t a, uint64_t b, uint64_t c) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  if (b != 0 && a > kMax / b) return kMax;
  return a * b > kMax - c ? kMax : a * b + c;
}

absl::StatusOr<ReplayReport> Replayer::Run() {
  absl::StatusOr<ReplayReport> result = RunSteps();
  // The collective goes before Replay returns; a caller following the run (observer) learns
  // that this is what runs now.
  if (ar_ != nullptr) {
    Observe({0, "end of scenario (destroying the collective)", "end of scenario", "end", 0, 0},
            result.ok() ? *result : r_);
    ar_.reset();
  }
  return result;
}

absl::StatusOr<ReplayReport> Replayer::RunSteps() {
  if (d_->world_size() != s_.world) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: world %d does not match the device's %d ranks", s_.file, s_.world, d_->world_size()));
  }
  seed_ = o_.seed.value_or(s_.seed);
  r_ = ReplayReport{};
  r_.scenario = s_.name;
  r_.file = s_.file;
  r_.device = d_->name();
  values_ = d_->HoldsValues();
  r_.fidelity = values_ ? "values" : "shadow";
  r_.world = s_.world;
  r_.wire = std::string(WireLabel(s_.wire, s_.dtype));
  r_.faults = o_.faults.ToString();
  r_.seed = seed_;
  r_.retained_mismatches_by_rank.assign(s_.world, 0);
  r_.collective = o_.collective;
  total_steps_ = s_.ExpandedStepCount();
  DMALAB_RETURN_IF_ERROR(CheckBounds());
  Observe({0, "setup (loading and creating the collective)", "setup", "setup", 0, 0}, r_);
  if (const uint64_t max_bytes = s_.MaxAllReduceBytes(); max_bytes > 0) {
    CollectiveParams params;
    params.max_bytes = max_bytes;
    params.dtype = s_.dtype;
    params.wire = s_.wire;
    params.pieces = o_.pieces;
    params.faults = o_.faults;
    params.options = o_.collective_options;
    params.process = o_.spmd_process;
    auto ar = OpenCollective(d_, o_.collective, params);
    if (!ar.ok()) return Prefixed(absl::StrCat(s_.file, ": "), ar.status());
    ar_ = *std::move(ar);
    r_.collective = ar_->name();
  }
  if (o_.progress) o_.progress(0, total_steps_);
  absl::Status s = Steps(s_.steps);
  if (!s.ok() && device_failure_.ok()) return s;  // bad input
  if (!s.ok()) {
    PollDeviceFindings();  // what the device's checkers saw before it failed (a deadlock)
    ReplayFinding f = NewFinding(failure_kind_, 0);
    f.detail = std::string(s.message());
    AddFinding(std::move(f));
  }
  Observe({0, "end of scenario", "end of scenario", "end", 0, 0}, r_);
  if (o_.inspect_at_end && device_failure_.ok()) {
    for (const auto& [name, t] : live_) {
      // A tensor that a step with ranks: left live on some ranks only is not inspected.
      if (std::find(t.on.begin(), t.on.end(), false) != t.on.end()) continue;
      DMALAB_RETURN_IF_ERROR(o_.inspect_at_end(name, t.views));
    }
  }
  // Return whatever is still live, so a device's allocator sees a clean end.
  step_text_ = step_desc_ = "end of scenario";
  step_id_ = "end";
  iteration_ = iterations_total_ = 0;
  while (!live_.empty()) Release(live_.begin()->first, /*at_end=*/true);
  if (ar_ != nullptr) {
    // The collective's end: what it still holds now is a leak. A follower (observer) learns
    // that the collective's destroy runs now.
    Observe({0, "end of scenario (destroying the collective)", "end of scenario", "end", 0, 0}, r_);
    if (absl::Status st = ar_->Close(); !st.ok() && device_failure_.ok()) {
      ReplayFinding f = NewFinding(ReplayFindingKind::kCollectiveError, 0);
      f.detail = absl::StrFormat("closing the collective failed: %s", st.message());
      AddFinding(std::move(f));
    }
  }
  PollDeviceFindings();
  return std::move(r_);
}

absl::Status Replayer::Steps(const std::vector<Step>& steps) {
  for (const Step& step : steps) {
    if (step.kind == StepKind::kRepeat) {
      iterations_.emplace_back(0, step.times);
      for (int64_t i = 0; i < step.times; ++i) {
        iterations_.back().first = i;
        DMALAB_RETURN_IF_ERROR(Steps(step.body));
      }
      iterations_.pop_back();
      continue;
    }
    ++r_.steps_executed;
    step_desc_ = step_text_ = step.Describe();
    step_id_ = step.path;
    d_->SetContext(absl::StrFormat("step %d %s", r_.steps_executed, step.Describe()));
    iteration_ = iterations_total_ = 0;
    if (!iterations_.empty()) {
      std::vector<std::string> its;
      iteration_ = 0;
      iterations_total_ = 1;
      for (auto [i, n] : iterations_) {
        its.push_back(absl::StrFormat("%d/%d", i + 1, n));
        iteration_ = iteration_ * n + i;  // the loader bounds the expanded step count
        iterations_total_ *= n;
      }
      ++iteration_;
      absl::StrAppend(&step_text_, " [iteration ", absl::StrJoin(its, ", "), "]");
    }
    Observe({r_.steps_executed, step_text_, step_desc_, step_id_, iteration_, iterations_total_},
            r_);
    DMALAB_RETURN_IF_ERROR(One(step));
    // Retain, unretain and expect_equal enqueue no device work: nothing can have changed.
    if (step.kind != StepKind::kRetain && step.kind != StepKind::kUnretain &&
        step.kind != StepKind::kExpectEqual) {
      DMALAB_RETURN_IF_ERROR(VerifyRetained());
    }
    CheckAliases();
    PollDeviceFindings();
    if (o_.progress) o_.progress(r_.steps_executed, total_steps_);
  }
  return absl::OkStatus();
}

absl::Status Replayer::CheckBounds() const {
  DMALAB_RETURN_IF_ERROR(CheckReplayWork(s_, o_.max_steps));
  if (o_.max_memory_bytes > 0 && values_) {
    const ReplayMemoryNeed need = EstimateReplayMemory(s_, o_);
    if (need.Total() > o_.max_memory_bytes) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "%s: the replay needs %d bytes (%.1f GiB: %d ranks x (%d bytes of live tensors at the "
          "peak + %d of all-reduce workspace) + %d on the host for retained snapshots and "
          "buffers), more than the limit of %d bytes (%.1f GiB%s)",
          s_.file, need.Total(), need.Total() / 1073741824.0, need.world,
          need.tensor_bytes_per_rank, need.workspace_bytes_per_rank, need.host_bytes,
          o_.max_memory_bytes, o_.max_memory_bytes / 1073741824.0,
          o_.max_memory_source.empty() ? "" : absl::StrCat(": ", o_.max_memory_source)));
    }
  }
  return absl::OkStatus();
}

absl::Status Replayer::One(const Step& step) {
  switch (step.kind) {
    case StepKind::kFill:
      return Fill(step);
    case StepKind::kAllReduce:
      return AllReduce(step);
    case StepKind::kAdd:
      return Add(step);
    case StepKind::kRetain:
      return Retain(step);
    case StepKind::kUnretain:
      EndRetention(step.tensor);
      return absl::OkStatus();
    case StepKind::kRelease:
      Release(step.tensor, /*at_end=*/false, step.ranks);
      return absl::OkStatus();
    case StepKind::kExpectUnchanged:
      // VerifyRetained runs after every step; this step asks for nothing more.
      return absl::OkStatus();
    case StepKind::kExpectEqual:
      return ExpectEqual(step);
    case StepKind::kRepeat:
      return absl::OkStatus();
    case StepKind::kCaptureGraph:
      return CaptureGraph(step);
    case StepKind::kLaunchGraph:
      return LaunchGraph(step);
  }
  return absl::OkStatus();
}

absl::Status Replayer::CaptureGraph(const Step& step) {
  CapturedGraph g;
  capturing_ = &g;
  absl::StatusOr<GraphId> id = d_->CaptureGraph([&]() -> absl::Status {
    for (const Step& b : step.body) {
      DMALAB_RETURN_IF_ERROR(One(b));
    }
    return absl::OkStatus();
  });
  capturing_ = nullptr;
  if (!id.ok()) {
    if (!device_failure_.ok()) return device_failure_;
    return Prefixed(absl::StrCat(step.Describe(), ": "), id.status());
  }
  g.id = *id;
  graphs_[step.graph] = std::move(g);
  if (ar_ != nullptr) {
    // The collective may now register the buffers the capture used with its peers.
    if (absl::Status s = ar_->CaptureEnded(); !s.ok()) {
      const absl::Status located = Prefixed(absl::StrCat(step.Describe(), ": "), s);
      if (IsRejectedArguments(s)) return located;
      return CollectiveFailed(located);
    }
  }
  return absl::OkStatus();
}

absl::Status Replayer::LaunchGraph(const Step& step) {
  const CapturedGraph& g = graphs_.at(step.graph);
  if (absl::Status s = d_->LaunchGraph(g.id); !s.ok()) return Failed(s);
  // The values the launch leaves, step by step as captured. A step whose operands are no longer
  // the storage captured read other memory: its destination's values are then unknown.
  const auto is_captured = [&](const std::pair<std::string, std::vector<MemRef>>& t) {
    auto it = live_.find(t.first);
    if (it == live_.end()) return false;
    for (int rank = 0; rank < s_.world; ++rank) {
      if (!(it->second.views[rank].mem == t.second[rank])) return false;
    }
    return true;
  };
  for (const CapturedEffect& e : g.effects) {
    if (!is_captured(e.tensors.back())) continue;  // it wrote memory no live tensor owns now
    const bool operands = std::all_of(e.tensors.begin(), e.tensors.end() - 1, is_captured);
    live_.at(e.tensors.back().first).known = operands ? KnownAfter(*e.step) : KnownValues();
  }
  for (const CapturedAllReduce& c : g.all_reduces) {
    // A graph keeps writing the storage it was captured with; once that is released, the
    // device's checkers (use after free) are what can tell.
    auto it = live_.find(c.output);
    if (it == live_.end()) continue;
    bool same = true;
    for (int rank = 0; rank < s_.world; ++rank) {
      same = same && it->second.views[rank].mem == c.output_mems[rank];
    }
    if (!same) continue;
    AllReduceRecord rec;
    rec.step_index = r_.steps_executed;
    rec.step = absl::StrFormat("%s > %s", step_text_, c.step);
    rec.input = c.input;
    rec.output = c.output;
    rec.form = c.form;
    rec.elems = it->second.decl->elems();
    rec.bytes = it->second.decl->bytes();
    DMALAB_RETURN_IF_ERROR(CheckOutput(std::move(rec), it->second));
  }
  return absl::OkStatus();
}

absl::Status Replayer::MakeLive(const std::string& name, const Step& step) {
  auto it = live_.find(name);
  if (it == live_.end()) {
    LiveTensor t;
    t.decl = s_.FindTensor(name);
    t.origin = step_text_;
    t.views.resize(s_.world);
    t.allocations.resize(s_.world);
    t.on.assign(s_.world, false);
    it = live_.emplace(name, std::move(t)).first;
  }
  LiveTensor& t = it->second;
  const TensorDecl& decl = *t.decl;
  for (int rank = 0; rank < s_.world; ++rank) {
    if (t.on[rank] || !step.OnRank(rank)) continue;
    auto mem = d_->Allocate(rank, decl.bytes(), decl.name);
    if (!mem.ok()) return Failed(mem.status());
    t.allocations[rank] = *mem;
    t.views[rank] = TensorView{mem->Slice(0, decl.bytes()), decl.dtype, decl.shape, true};
    t.on[rank] = true;
  }
  return absl::OkStatus();
}

absl::Status Replayer::ReadInto(const TensorView& view, Contents* out) {
  const MemRef mem = view.mem.Slice(0, view.bytes());
  if (!values_) {
    absl::StatusOr<Provenance> p = d_->ReadProvenance(mem);
    if (!p.ok()) return Failed(p.status());
    out->provenance = *std::move(p);
    return absl::OkStatus();
  }
  DMALAB_RETURN_IF_ERROR(out->bytes.Resize(view.bytes()));
  if (absl::Status s = d_->Read(mem, out->bytes.span()); !s.ok()) return Failed(s);
  return absl::OkStatus();
}

int64_t Replayer::CountChanged(const Contents& a, const Contents& b, DType dtype,
                               int64_t* first) const {
  return values_ ? CountChangedElems(a.bytes.span(), b.bytes.span(), DTypeBytes(dtype), first)
                 : CountChangedElems(a.provenance, b.provenance, DTypeBytes(dtype), first);
}

std::string Replayer::FirstChange(const Contents& was, const Contents& now, DType dtype,
                                  int64_t first) const {
  if (!values_) return absl::StrFormat("first at %d (provenance)", first);
  return absl::StrFormat("first at %d: %g -> %g", first,
                         LoadAsFloat(dtype, was.bytes.data(), first),
                         LoadAsFloat(dtype, now.bytes.data(), first));
}

absl::Status Replayer::Fill(const Step& step) {
  const TensorDecl& decl = *s_.FindTensor(step.tensor);
  DMALAB_RETURN_IF_ERROR(MakeLive(step.tensor, step));
  std::vector<int64_t> its;
  for (auto [i, n] : iterations_) its.push_back(i);
  const uint64_t step_seed = FillStepSeed(step.seed, its);
  std::vector<uint64_t> keys;
  for (int rank = 0; rank < s_.world; ++rank) keys.push_back(FillKey(seed_, step_seed, rank));
  LiveTensor& t = live_.at(step.tensor);
  KnownValues filled = KnownValues::Fill(step.fill_kind, step.lo, step.hi, keys);
  t.known =
      step.ranks.empty() ? std::move(filled) : KnownValues::Select(t.known, filled, OnRanks(step));
  for (int rank = 0; rank < s_.world; ++rank) {
    if (!step.OnRank(rank)) continue;
    const uint64_t key = keys[rank];
    const TensorView& v = t.views[rank];
    const MemRef mem = v.mem.Slice(0, v.bytes());
    if (!values_) {
      // The fill's contents are a function of exactly these parameters (common/scenario/fill.h).
      uint64_t lo_bits, hi_bits;
      std::memcpy(&lo_bits, &step.lo, 8);
      std::memcpy(&hi_bits, &step.hi, 8);
      const uint64_t content =
          MakeOrigin({static_cast<uint64_t>(decl.dtype), static_cast<uint64_t>(step.fill_kind),
                      lo_bits, hi_bits, key, decl.bytes()});
      if (absl::Status s = d_->WriteShadow(mem, content); !s.ok()) return Failed(s);
      continue;
    }
    auto content = std::make_shared<FillContent>(decl.dtype, step.fill_kind, step.lo, step.hi, key);
    if (absl::Status s = d_->WriteGenerated(mem, std::move(content)); !s.ok()) return Failed(s);
  }
  return absl::OkStatus();
}

absl::Status Replayer::AllReduce(const Step& step) {
  const LiveTensor& in = live_.at(step.input);
  AllReduceRecord rec;
  rec.step_index = r_.steps_executed;
  rec.step = step_text_;
  rec.input = step.input;
  rec.form = step.form;
  rec.elems = in.decl->elems();
  rec.bytes = in.decl->bytes();
  // Before the call: in place, it overwrites its input.
  KnownValues after = KnownAfter(step);
  // Whose fault a failed call is: the built-in ring refusing the scenario's arguments is bad
  // input; anything else is the collective under test failing, a finding that stops the replay
  // (IsCollectiveCallBadInput, CollectiveCallFailureKind).
  auto call_failed = [&](const absl::Status& s) {
    const absl::Status located = Prefixed(absl::StrCat(step.Describe(), ": "), s);
    if (IsCollectiveCallBadInput(s, o_.collective)) return located;
    if (CollectiveCallFailureKind(s, o_.collective) == ReplayFindingKind::kCollectiveError) {
      return CollectiveFailed(located);
    }
    return Failed(located);
  };
  if (step.form == AllReduceForm::kDefault) {
    auto outs = ar_->AllReduce(in.views);
    if (!outs.ok()) return call_failed(outs.status());
    LiveTensor t;
    t.decl = s_.FindTensor(step.result);
    t.origin = step_text_;
    t.views = *outs;
    for (const TensorView& v : t.views) t.allocations.push_back(v.mem);
    t.on.assign(t.views.size(), true);
    live_[step.result] = std::move(t);
    rec.output = step.result;
  } else {
    rec.output = step.form == AllReduceForm::kOut ? step.out : step.input;
    if (absl::Status s = ar_->AllReduce(in.views, live_.at(rec.output).views); !s.ok()) {
      return call_failed(s);
    }
  }
  LiveTensor& out = live_.at(rec.output);
  if (capturing_ != nullptr) {  // nothing ran yet: every launch checks the output
    CapturedAllReduce c{step.Describe(), rec.input, rec.output, rec.form, {}};
    for (const TensorView& v : out.views) c.output_mems.push_back(v.mem);
    capturing_->all_reduces.push_back(std::move(c));
    RecordEffect(step, {rec.input, rec.output});
    return absl::OkStatus();
  }
  out.known = std::move(after);
  CheckGrowth();
  return CheckOutput(std::move(rec), out);
}

int64_t Replayer::HeldByCollective(int rank) const {
  const int64_t live = d_->LiveAllocations(rank);
  if (live < 0) return -1;
  int64_t scenario = 0;
  for (const auto& [name, t] : live_) {
    for (const MemRef& m : t.allocations) scenario += m.rank == rank ? 1 : 0;
  }
  return live - scenario;
}

void Replayer::CheckGrowth() {
  if (ar_ == nullptr || ar_->TracksOwnGrowth()) return;
  if (growth_.empty()) growth_.resize(s_.world);
  for (int rank = 0; rank < s_.world; ++rank) {
    const int64_t held = HeldByCollective(rank);
    if (held < 0 || !growth_[rank].After(held)) continue;
    ReplayFinding f = NewFinding(ReplayFindingKind::kDeviceChecker, rank);
    f.checker = "resource_growth";
    f.signature = absl::StrCat("resource_growth ", ar_->name());
    f.detail = absl::StrFormat(
        "%s holds %d allocations on rank %d beyond the scenario's live tensors, more after each "
        "of the last %d calls; a collective whose allocations grow with every call in steady "
        "state runs the device out of memory",
        ar_->name(), held, rank, ResourceGrowth::kCalls);
    AddFinding(std::move(f));
  }
}

void Replayer::RecordEffect(const Step& step, const std::vector<std::string>& tensors) {
  CapturedEffect e;
  e.step = &step;
  for (const std::string& name : tensors) {
    std::vector<MemRef> mems;
    for (const TensorView& v : live_.at(name).views) mems.push_back(v.mem);
    e.tensors.emplace_back(name, std::move(mems));
  }
  capturing_->effects.push_back(std::move(e));
}

KnownValues Replayer::KnownAfter(const Step& step) const {
  if (step.kind == StepKind::kAdd) {
    return KnownValues::Add(live_.at(step.a).known, live_.at(step.b).known,
                            s_.FindTensor(step.dst)->dtype);
  }
  return KnownValues::AllReduce(live_.at(step.input).known, s_.world,
                                s_.FindTensor(step.input)->dtype, s_.wire == WireMode::kNative);
}

void Replayer::Forget(const std::string& name) {
  if (auto it = live_.find(name); it != live_.end()) it->second.known = KnownValues();
}

// One rank's output against what it must hold.
struct ValueCheck {
  int64_t count = 0;  // elements that fail the check
  int64_t first = 0;
  float got = 0, want = 0;
};

// Elements of the exact values computed at once: 128 KiB of int64, beside the pieces in L2.
constexpr int64_t kExactChunk = int64_t{1} << 14;

// `values`, integers that `dtype` holds exactly, as elements of `dtype` at `out`.
void EncodeExact(DType dtype, absl::Span<const int64_t> values, uint8_t* out) {
  const auto encode = [&](auto convert, int width) {
    for (size_t i = 0; i < values.size(); ++i) {
      const auto e = convert(static_cast<float>(values[i]));
      std::memcpy(out + width * i, &e, width);
    }
  };
  switch (dtype) {
    case DType::kBF16:
      return encode(FloatToBF16, 2);
    case DType::kFP16:
      return encode(FloatToFP16, 2);
    case DType::kFP32:
      return encode([](float f) { return f; }, 4);
  }
}

absl::Status Replayer::EncodeKnown(const KnownValues& known, int rank, DType dtype, int64_t first,
                                   int64_t elems) {
  const int width = DTypeBytes(dtype);
  DMALAB_RETURN_IF_ERROR(expected_bytes_.Resize(static_cast<size_t>(elems) * width));
  for (int64_t at = 0; at < elems; at += kExactChunk) {
    expected_.resize(std::min(kExactChunk, elems - at));
    known.Exact(rank, first + at, absl::MakeSpan(expected_));
    EncodeExact(dtype, expected_, expected_bytes_.data() + at * width);
  }
  return absl::OkStatus();
}

absl::Status Replayer::CheckOutput(AllReduceRecord rec, LiveTensor& out) {
  const DType dtype = out.decl->dtype;
  const int width = DTypeBytes(dtype);
  // Only a device with values can say; a shadow device's provenance has no numbers.
  const bool check_sum = values_ && out.known.exact();
  const bool check_finite = values_ && out.known.bound() <= MaxFinite(dtype);
  // Exact values lie within the dtype's exact integer range (KnownValues' rule); the check says
  // so rather than trust it. Where they do, they are compared as bytes first.
  const bool encodable = out.known.bound() <= static_cast<double>(ExactIntegerLimit(dtype));
  std::vector<ValueCheck> wrong(s_.world), non_finite(s_.world);
  // By rank: elements that differ from rank 0's, and the first of them.
  std::vector<int64_t> changed(s_.world, 0), first_changed(s_.world, 0);
  int expected_rank = -1;  // whose exact values of the current piece expected_bytes_ holds
  // The elements [first, first + piece.size() / width) of `rank`'s output.
  const auto check_values = [&](int rank, absl::Span<const uint8_t> piece,
                                int64_t first) -> absl::Status {
    const int64_t elems = static_cast<int64_t>(piece.size()) / width;
    if (check_sum) {
      if (encodable && (expected_rank < 0 || !out.known.SameAs(expected_rank, rank))) {
        expected_rank = rank;
        DMALAB_RETURN_IF_ERROR(EncodeKnown(out.known, rank, dtype, first, elems));
      }
      // Usually every byte is the exact sum's: one comparison of the pieces says so, and then
      // every value is finite too. Otherwise (a wrong value, or a -0 that compares equal to 0)
      // element by element.
      if (encodable && std::memcmp(piece.data(), expected_bytes_.data(), piece.size()) == 0) {
        return absl::OkStatus();
      }
      ValueCheck& w = wrong[rank];
      for (int64_t at = 0; at < elems; at += kExactChunk) {
        expected_.resize(std::min(kExactChunk, elems - at));
        out.known.Exact(rank, first + at, absl::MakeSpan(expected_));
        for (size_t j = 0; j < expected_.size(); ++j) {
          const int64_t i = at + static_cast<int64_t>(j);
          const float got = LoadAsFloat(dtype, piece.data(), i);
          if (got == static_cast<float>(expected_[j])) continue;
          if (w.count++ == 0) w = ValueCheck{1, first + i, got, static_cast<float>(expected_[j])};
        }
      }
    }
    if (check_finite) {
      const NonFiniteCount found = CountNonFinite(dtype, piece.data(), elems);
      ValueCheck& n = non_finite[rank];
      if (found.count > 0 && n.count == 0) {
        n = ValueCheck{0, first + found.first, LoadAsFloat(dtype, piece.data(), found.first), 0};
      }
      n.count += found.count;
    }
    return absl::OkStatus();
  };
  Xxh64Hasher hash;
  // Rank `rank`'s bytes from `offset` on, and rank 0's same bytes: pieces come in offset order,
  // rank 0's first, so counts and first indices are those over the whole outputs.
  const auto check_piece = [&](int rank, uint64_t offset, absl::Span<const uint8_t> bytes,
                               absl::Span<const uint8_t> rank0) -> absl::Status {
    const int64_t first = static_cast<int64_t>(offset) / width;
    if (rank == 0) {
      hash.Update(bytes);
      expected_rank = -1;  // a new piece
    }
    DMALAB_RETURN_IF_ERROR(check_values(rank, bytes, first));
    if (rank == 0) return absl::OkStatus();
    int64_t at = 0;
    const int64_t c = CountChangedElems(rank0, bytes, width, &at);
    if (c > 0 && changed[rank] == 0) first_changed[rank] = first + at;
    changed[rank] += c;
    return absl::OkStatus();
  };
  // Ranks read and checked whole: all, unless a read failed (the device's failure, which ends
  // the replay after the rank consistency of the ranks before it is reported).
  int checked = s_.world;
  absl::Status read_failed;
  if (!values_) {
    // Provenance is a list of origins, not bytes: whole outputs cost little host memory.
    DMALAB_RETURN_IF_ERROR(ReadInto(out.views[0], &buf0_));
    rec.hash = ProvenanceDigest(buf0_.provenance);
    for (int rank = 1; rank < s_.world; ++rank) {
      read_failed = ReadInto(out.views[rank], &buf_);
      if (!read_failed.ok()) {
        checked = rank;
        break;
      }
      changed[rank] = CountChanged(buf0_, buf_, dtype, &first_changed[rank]);
    }
  } else {
    // A piece of every rank at a time: on a device that copies in pieces (the simulator), the
    // host holds a few pieces, never a tensor.
    std::vector<MemRef> srcs;
    for (const TensorView& v : out.views) srcs.push_back(v.mem.Slice(0, v.bytes()));
    absl::Status check_failed;  // the checks' own error (no host memory), not the device's
    checked = 0;
    absl::Status s = d_->ReadPieces(
        srcs, kCheckPieceBytes,
        [&](uint64_t offset, absl::Span<const absl::Span<const uint8_t>> pieces) -> absl::Status {
          checked = static_cast<int>(pieces.size());
          for (int rank = 0; rank < checked && check_failed.ok(); ++rank) {
            check_failed = check_piece(rank, offset, pieces[rank], pieces[0]);
          }
          return check_failed;
        });
    DMALAB_RETURN_IF_ERROR(check_failed);
    if (!s.ok()) read_failed = Failed(s);
    rec.hash = hash.Digest();
  }
  bool wrong_values = false;
  for (int rank = 1; rank < checked; ++rank) {
    if (changed[rank] == 0) continue;
    wrong_values = true;
    rec.rank_consistent = false;
    r_.rank_consistent = false;
    ReplayFinding f = NewFinding(ReplayFindingKind::kRankInconsistent, rank);
    f.storage = {{rec.output, out.views[0].mem}, {rec.output, out.views[rank].mem}};
    f.elems = changed[rank];
    f.of_elems = rec.elems;
    f.detail =
        absl::StrFormat("output '%s' differs from rank 0's in %d of %d elements (first at %d)",
                        rec.output, changed[rank], rec.elems, first_changed[rank]);
    AddFinding(std::move(f));
  }
  DMALAB_RETURN_IF_ERROR(read_failed);
  // In the PyTorch harness's order (python/dmalab/torch/worker.py), with its words.
  for (int rank = 0; rank < s_.world; ++rank) {
    const ValueCheck& w = wrong[rank];
    if (w.count == 0) continue;
    wrong_values = true;
    ReplayFinding f = NewFinding(ReplayFindingKind::kWrongSum, rank);
    f.storage = {{rec.output, out.views[rank].mem}};
    f.elems = w.count;
    f.of_elems = rec.elems;
    f.detail = absl::StrFormat(
        "output '%s' differs from the exact sum of the ranks' integer inputs in %d of %d "
        "elements; first at %d: %g, exact %g",
        rec.output, w.count, rec.elems, w.first, w.got, w.want);
    AddFinding(std::move(f));
  }
  for (int rank = 0; rank < s_.world; ++rank) {
    const ValueCheck& n = non_finite[rank];
    if (n.count == 0) continue;
    wrong_values = true;
    ReplayFinding f = NewFinding(ReplayFindingKind::kNonFinite, rank);
    f.storage = {{rec.output, out.views[rank].mem}};
    f.elems = n.count;
    f.of_elems = rec.elems;
    f.detail = absl::StrFormat(
        "output '%s' holds %d non-finite elements (NaN or infinity) of %d, from finite inputs; "
        "first at %d: %g",
        rec.output, n.count, rec.elems, n.first, n.got);
    AddFinding(std::move(f));
  }
  if (wrong_values) out.known = KnownValues();  // its readers are not to blame
  if (++r_.all_reduces_total <= o_.max_all_reduce_records) r_.all_reduces.push_back(std::move(rec));
  return absl::OkStatus();
}

absl::Status Replayer::Add(const Step& step) {
  DMALAB_RETURN_IF_ERROR(MakeLive(step.dst, step));
  LiveTensor& dst = live_.at(step.dst);
  const LiveTensor& a = live_.at(step.a);
  const LiveTensor& b = live_.at(step.b);
  if (capturing_ != nullptr) {
    RecordEffect(step, {step.a, step.b, step.dst});
  } else {
    dst.known = step.ranks.empty()
                    ? KnownAfter(step)
                    : KnownValues::Select(dst.known, KnownAfter(step), OnRanks(step));
  }
  const std::string label = step.label.empty() ? "add" : step.label;
  for (int rank = 0; rank < s_.world; ++rank) {
    if (!step.OnRank(rank)) continue;
    const Operand terms[] = {{a.views[rank].mem, Codec::kPlain},
                             {b.views[rank].mem, Codec::kPlain}};
    absl::Status s =
        d_->Reduce(d_->ComputeStream(rank), dst.decl->dtype,
                   Operand{dst.views[rank].mem, Codec::kPlain}, terms, dst.decl->elems(), label);
    if (!s.ok()) return Failed(s);
  }
  return absl::OkStatus();
}

absl::Status Replayer::Retain(const Step& step) {
  const LiveTensor& t = live_.at(step.tensor);
  Retention ret;
  ret.origin = step_text_;
  ret.snapshot.resize(s_.world);
  ret.max_changed.assign(s_.world, 0);
  std::vector<Contents*> distinct;
  for (int rank = 0; rank < s_.world; ++rank) {
    // Read into buf_, then keep its buffer (or share an equal one): no copy. Buffers of ended
    // retentions are reused, so a replay that retains often maps no new host memory for it.
    DMALAB_RETURN_IF_ERROR(ReadInto(t.views[rank], &buf_));
    if (values_) {
      auto same = std::find_if(distinct.begin(), distinct.end(), [&](const Contents* c) {
        return c->bytes.size() == buf_.bytes.size() &&
               std::memcmp(c->bytes.data(), buf_.bytes.data(), buf_.bytes.size()) == 0;
      });
      if (same != distinct.end()) {
        for (int q = 0; q < rank; ++q) {
          if (ret.snapshot[q].get() == *same) ret.snapshot[rank] = ret.snapshot[q];
        }
        continue;
      }
    }
    auto kept = std::make_shared<Contents>();
    if (!snapshot_pool_.empty()) {
      *kept = std::move(snapshot_pool_.back());
      snapshot_pool_.pop_back();
    }
    std::swap(*kept, buf_);
    distinct.push_back(kept.get());
    ret.snapshot[rank] = std::move(kept);
  }
  r_.retained_elems += t.decl->elems();
  retained_[step.tensor] = std::move(ret);
  return absl::OkStatus();
}

void Replayer::EndRetention(const std::string& name) {
  auto it = retained_.find(name);
  if (it == retained_.end()) return;
  std::set<Contents*> returned;
  for (const std::shared_ptr<Contents>& buf : it->second.snapshot) {
    if (returned.insert(buf.get()).second) snapshot_pool_.push_back(std::move(*buf));
  }
  retained_.erase(it);
}

absl::Status Replayer::VerifyRetained() {
  for (auto& [name, ret] : retained_) {
    const LiveTensor& t = live_.at(name);
    for (int rank = 0; rank < s_.world; ++rank) {
      DMALAB_RETURN_IF_ERROR(ReadInto(t.views[rank], &buf_));
      int64_t first = 0;
      const int64_t changed = CountChanged(*ret.snapshot[rank], buf_, t.decl->dtype, &first);
      if (changed > 0) Forget(name);
      if (changed <= ret.max_changed[rank]) continue;
      if (ret.max_changed[rank] == 0) {
        ReplayFinding f = NewFinding(ReplayFindingKind::kRetainedMismatch, rank);
        f.storage = {{name, t.views[rank].mem}};
        f.elems = changed;
        f.of_elems = t.decl->elems();
        f.detail = absl::StrFormat(
            "retained '%s' (retained by %s) changed in %d of %d elements; %s", name, ret.origin,
            changed, t.decl->elems(), FirstChange(*ret.snapshot[rank], buf_, t.decl->dtype, first));
        AddFinding(std::move(f));
      }
      r_.retained_mismatches_by_rank[rank] += changed - ret.max_changed[rank];
      if (rank == r_.retained_rank) r_.retained_mismatches += changed - ret.max_changed[rank];
      ret.max_changed[rank] = changed;
    }
  }
  return absl::OkStatus();
}

absl::Status Replayer::ExpectEqual(const Step& step) {
  const LiveTensor& a = live_.at(step.a);
  const LiveTensor& b = live_.at(step.b);
  for (int rank = 0; rank < s_.world; ++rank) {
    DMALAB_RETURN_IF_ERROR(ReadInto(a.views[rank], &buf0_));
    DMALAB_RETURN_IF_ERROR(ReadInto(b.views[rank], &buf_));
    int64_t first = 0;
    const int64_t changed = CountChanged(buf0_, buf_, a.decl->dtype, &first);
    if (changed == 0) continue;
    ReplayFinding f = NewFinding(ReplayFindingKind::kExpectEqual, rank);
    f.storage = {{step.a, a.views[rank].mem}, {step.b, b.views[rank].mem}};
    f.elems = changed;
    f.of_elems = a.decl->elems();
    f.detail = absl::StrFormat("'%s' and '%s' differ in %d of %d elements (first at %d)", step.a,
                               step.b, changed, a.decl->elems(), first);
    AddFinding(std::move(f));
  }
  return absl::OkStatus();
}

void Replayer::Release(std::string name, bool at_end, const std::vector<int>& ranks) {
  LiveTensor& t = live_.at(name);
  const std::string origin = t.origin;
  std::vector<std::pair<int, MemRef>> freed;
  bool rest = false;  // still live on a rank not released here
  for (int rank = 0; rank < s_.world; ++rank) {
    if (!t.on[rank]) continue;
    if (!ranks.empty() && std::find(ranks.begin(), ranks.end(), rank) == ranks.end()) {
      rest = true;
      continue;
    }
    freed.emplace_back(rank, t.allocations[rank]);
    t.on[rank] = false;
    t.views[rank] = TensorView{};
    t.allocations[rank] = MemRef{};
  }
  // A release on some ranks is never of a retained tensor (the loader refuses it).
  if (!rest) {
    EndRetention(name);
    for (auto it = reported_aliases_.begin(); it != reported_aliases_.end();) {
      it = (it->first == name || it->second == name) ? reported_aliases_.erase(it) : std::next(it);
    }
    live_.erase(name);
  }
  for (const auto& [rank, mem] : freed) {
    absl::Status s = d_->Free(mem);
    if (s.ok()) continue;
    ReplayFinding f = NewFinding(ReplayFindingKind::kFreeFailed, rank);
    if (at_end) f.step_index = 0;
    f.storage = {{name, mem}};
    f.detail = absl::StrFormat("freeing '%s' (made by %s) failed: %s", name, origin, s.message());
    AddFinding(std::move(f));
  }
}

void Replayer::CheckAliases() {
  // Every live tensor's bytes on every rank it lives on (as FindResultAliases, without copying
  // the views: this runs after every step).
  std::vector<MemRef> ranges;
  std::vector<const std::string*> names;
  for (const auto& [name, t] : live_) {
    for (int rank = 0; rank < s_.world; ++rank) {
      if (!t.on[rank]) continue;
      ranges.push_back(t.views[rank].mem.Slice(0, t.views[rank].bytes()));
      names.push_back(&name);
    }
  }
  // One finding per pair of tensors while they stay live together, naming every rank.
  std::map<std::pair<std::string, std::string>, std::vector<ResultAlias>> pairs;
  for (const auto& [i, j] : OverlappingPairs(ranges)) {
    if (*names[i] == *names[j]) continue;
    const ResultAlias a{*names[i], *names[j], ranges[i].rank,
                        std::max(ranges[i].addr, ranges[j].addr),
                        std::min(ranges[i].end(), ranges[j].end())};
    const auto key = std::minmax(a.first, a.second);
    pairs[{key.first, key.second}].push_back(a);
  }
  for (const auto& [key, hits] : pairs) {
    r_.pointer_alias = true;
    // Writing either changes the other.
    Forget(key.first);
    Forget(key.second);
    if (!reported_aliases_.insert(key).second) continue;
    const ResultAlias& a = hits.front();
    std::vector<int> ranks;
    for (const ResultAlias& h : hits) ranks.push_back(h.rank);
    ReplayFinding f = NewFinding(ReplayFindingKind::kPointerAlias, a.rank);
    f.storage = {{a.first, live_.at(a.first).views[a.rank].mem},
                 {a.second, live_.at(a.second).views[a.rank].mem}};
    f.detail = absl::StrFormat(
        "live tensors '%s' (made by %s) and '%s' (made by %s) share bytes [0x%x, 0x%x) on "
        "rank(s) %s",
        a.first, live_.at(a.first).origin, a.second, live_.at(a.second).origin, a.lo, a.hi,
        absl::StrJoin(ranks, ","));
    AddFinding(std::move(f));
  }
}

void Replayer::PollDeviceFindings() {
  DeviceFindings found;
  if (o_.poll_device_findings) found = o_.poll_device_findings();
  if (ar_ != nullptr) {
    DeviceFindings own = ar_->TakeFindings();
    for (DeviceFinding& d : own.findings) found.findings.push_back(std::move(d));
    found.not_kept += own.not_kept;
  }
  for (DeviceFinding& d : found.findings) {
    ReplayFinding f = NewFinding(ReplayFindingKind::kDeviceChecker, std::max(d.rank, 0));
    f.checker = d.checker;
    if (d.mem.bytes > 0) f.storage = {{d.alloc_tag, d.mem}};
    f.signature = DeviceFindingSignature(d);
    f.ops = std::move(d.ops);
    f.detail = std::move(d.detail);
    AddFinding(std::move(f));
  }
  r_.device_findings_not_kept += found.not_kept;
  r_.findings_total += found.not_kept;
}

ReplayFinding Replayer::NewFinding(ReplayFindingKind kind, int rank) const {
  ReplayFinding f;
  f.kind = kind;
  f.checker = std::string(ReplayFindingKindName(kind));
  f.step_index = r_.steps_executed;
  f.step = step_text_;
  f.step_desc = step_desc_;
  f.step_id = step_id_;
  f.iteration = iteration_;
  f.iterations = iterations_total_;
  f.rank = rank;
  return f;
}

void Replayer::AddFinding(ReplayFinding f) {
  ++r_.findings_total;
  AddToGroups(r_, group_of_, f);
  if (static_cast<int64_t>(r_.findings.size()) < o_.max_findings)
    r_.findings.push_back(std::move(f));
}

}  // namespace

uint64_t ReplayMemoryNeed::Total() const {
  return MulAdd(static_cast<uint64_t>(world), PerRank(), host_bytes);
}

ReplayMemoryNeed EstimateReplayMemory(const Scenario& scenario, const ReplayOptions& options) {
  ReplayMemoryNeed need;
  need.world = scenario.world;
  MemoryWalk walk(scenario);
  walk.Walk(scenario.steps);
  need.tensor_bytes_per_rank = walk.peak_live();
  // The built-in ring's workspace is known; a plugin's own memory is not counted.
  const uint64_t max_bytes = scenario.MaxAllReduceBytes();
  if (max_bytes > 0 && options.collective == kRingCollective) {
    DmaAllReduceOptions ar;
    ar.max_bytes = max_bytes;
    ar.wire = scenario.wire;
    ar.pieces = options.pieces;
    ar.faults = options.faults;
    need.workspace_bytes_per_rank = DmaAllReduce::WorkspaceBytesPerRank(scenario.world, ar);
  }
  uint64_t largest = 0, most_elems = 0;
  for (const auto& [name, t] : scenario.tensors) {
    largest = std::max(largest, t.bytes());
    most_elems = std::max(most_elems, static_cast<uint64_t>(t.elems()));
  }
  // Two read buffers, and an output's exact values (int64 each).
  const uint64_t buffers = MulAdd(largest, 2, MulAdd(most_elems, sizeof(int64_t), 0));
  need.host_bytes = MulAdd(walk.peak_retained(), static_cast<uint64_t>(scenario.world), buffers);
  return need;
}

bool IsRejectedArguments(const absl::Status& status) {
  return absl::IsInvalidArgument(status) || absl::IsFailedPrecondition(status);
}

bool IsCollectiveCallBadInput(const absl::Status& status, std::string_view collective) {
  return !IsPluginPath(collective) && IsRejectedArguments(status);
}

ReplayFindingKind CollectiveCallFailureKind(const absl::Status& status,
                                            std::string_view collective) {
  return absl::IsAborted(status) || IsPluginPath(collective) ? ReplayFindingKind::kCollectiveError
                                                             : ReplayFindingKind::kDeviceError;
}

absl::StatusOr<ReplayReport> Replay(const Scenario& scenario, Device* device,
                                    const ReplayOptions& options) {
  return Replayer(scenario, device, options).Run();
}

absl::Status CheckReplayWork(const Scenario& scenario, int64_t max_steps) {
  // The work counts every repeat iteration, so repeats around an empty body are bounded too.
  const int64_t work = scenario.ExpandedWork();
  if (max_steps <= 0 || work <= max_steps) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: found %s steps with repeats expanded (every repeat iteration counting as one step at "
      "least), allowed at most %d steps in one replay (ReplayOptions::max_steps; reduce the "
      "repeat counts)",
      scenario.file,
      work == std::numeric_limits<int64_t>::max() ? "more than 2^63" : absl::StrFormat("%d", work),
      max_steps));
}

void AddFindingTo(ReplayReport& report, ReplayFinding finding, int max_findings) {
  std::map<std::string, size_t> group_of;
  for (size_t i = 0; i < report.groups.size(); ++i) group_of[GroupKey(report.groups[i].first)] = i;
  ++report.findings_total;
  AddToGroups(report, group_of, finding);
  if (static_cast<int64_t>(report.findings.size()) < max_findings) {
    report.findings.push_back(std::move(finding));
  }
}

void GroupFindings(ReplayReport& report) {
  report.groups.clear();
  report.groups_not_kept = 0;
  std::map<std::string, size_t> group_of;
  for (ReplayFinding& f : report.findings) AddToGroups(report, group_of, f);
}

}  // namespace dmalab

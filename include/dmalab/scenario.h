// The scenario model: a replayable sequence of operations over named per-rank tensors.
//
// A Scenario is what include/dmalab/scenario_loader.h makes from a YAML file (format:
// scenarios/README.md) and what include/dmalab/replay.h executes on any Device. Every tensor name
// stands for W tensors, one per rank, of the same shape and dtype. A loaded Scenario is valid:
// every name is declared, every shape fits the world size, and every step only uses tensors that
// are live at that point (the loader checks this by walking the steps, repeats included).
#ifndef DMALAB_SCENARIO_H_
#define DMALAB_SCENARIO_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dmalab/dtype.h"
#include "dmalab/wire.h"

namespace dmalab {

// Where something was written: 1-based line and column of a YAML file.
struct SourceLoc {
  std::string file;
  int line = 0;
  int column = 0;

  // "file:line:column".
  std::string ToString() const;
};

// A named per-rank tensor.
struct TensorDecl {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kBF16;
  SourceLoc loc;

  int64_t elems() const;
  uint64_t bytes() const { return static_cast<uint64_t>(elems()) * DTypeBytes(dtype); }
};

enum class StepKind {
  kFill,             // write deterministic contents (allocating the tensor if not live)
  kAllReduce,        // DmaAllReduce over the ranks' copies of `input`
  kRetain,           // snapshot `tensor`; re-verified after every later step
  kUnretain,         // stop re-verifying `tensor`
  kRelease,          // free `tensor` (ends its retention); "release" or "free"
  kAdd,              // dst = a + b per element, on each rank's compute stream
  kExpectUnchanged,  // check the retained `tensor` against its snapshot now
  kExpectEqual,      // check `a` and `b` bit-equal on every rank
  kRepeat,           // run `body` `times` times
  kCaptureGraph,     // capture `body` (explicit-form all_reduces and adds) into graph `graph`
  kLaunchGraph,      // replay graph `graph` once, exactly as captured
};

// The YAML key of a step kind ("all_reduce", ...).
std::string_view StepKindName(StepKind kind);

enum class FillKind {
  kRandom,  // uniform in [lo, hi), rounded to the dtype
  kInt,     // integers uniform in [lo, hi] (inclusive), exact in the dtype
};

// The form of an all_reduce step.
enum class AllReduceForm {
  kDefault,  // fresh output from DmaAllReduce::AllReduce(inputs), bound to `result`
  kOut,      // caller-owned `out`, which must be live
  kInPlace,  // out == input
};

std::string_view AllReduceFormName(AllReduceForm form);

// Where a field of a step was written, for located errors.
struct FieldSource {
  std::string path;  // "steps[3].all_reduce.input"
  SourceLoc loc;
};

struct Step {
  StepKind kind = StepKind::kFill;
  SourceLoc loc;
  std::string path;   // "steps[3]"
  std::string label;  // optional, for reports
  // The sources of the tensor-name fields that are set ("tensor", "input", "out", ...).
  std::map<std::string, FieldSource> sources;

  // kFill, kRetain, kUnretain, kRelease, kExpectUnchanged.
  std::string tensor;
  // kFill.
  FillKind fill_kind = FillKind::kRandom;
  uint64_t seed = 0;
  double lo = -1.0;
  double hi = 1.0;
  // kAllReduce.
  std::string input;
  AllReduceForm form = AllReduceForm::kDefault;
  std::string result;  // kDefault: the name bound to the fresh output
  std::string out;     // kOut
  // kAdd: dst = a + b. kExpectEqual: a, b.
  std::string dst;
  std::string a;
  std::string b;
  // kRepeat, kCaptureGraph: body.
  int64_t times = 0;
  std::vector<Step> body;
  // kCaptureGraph, kLaunchGraph.
  std::string graph;
  // kFill, kAdd, kRelease: the ranks whose host runs the step (ascending), as when one rank
  // frees and reallocates a buffer its peers keep; empty: every rank.
  std::vector<int> ranks;

  // Whether the step runs on `rank`.
  bool OnRank(int rank) const;

  // "all_reduce 'o_proj' at file:12:5" style description for reports.
  std::string Describe() const;
};

// An expected verdict of a replay under a set of injected faults. Fields left unset are not
// compared.
struct Expectation {
  std::string faults = "none";  // as FaultSet::Parse reads it
  bool pass = true;
  std::optional<bool> pointer_alias;
  std::optional<int64_t> retained_mismatches;
  std::optional<bool> rank_consistent;
  SourceLoc loc;
};

struct Scenario {
  std::string name;         // the file name without directory and extension, unless set
  std::string description;  // optional free text
  std::string file;         // the file it was loaded from
  int world = 0;
  DType dtype = DType::kBF16;  // default dtype of tensors
  WireMode wire = WireMode::kNative;
  uint64_t seed = 0;     // mixed into every fill
  std::string topology;  // optional topology file, for the timing model
  std::map<std::string, std::vector<int64_t>> shapes;  // named shapes
  std::map<std::string, TensorDecl> tensors;
  std::vector<Step> steps;
  std::vector<Expectation> expect;

  // The declaration of `name`, or nullptr.
  const TensorDecl* FindTensor(std::string_view name) const;
  // The largest tensor that is all-reduced, in bytes (0 if none); sizes DmaAllReduce.
  uint64_t MaxAllReduceBytes() const;
  // Number of steps a replay executes, repeats expanded; INT64_MAX when it does not fit.
  int64_t ExpandedStepCount() const;
  // The work of a replay, what bounds it (ReplayOptions::max_steps): the expanded step count
  // with every repeat iteration counting as at least one step, so that repeats around an empty
  // body count the product of their counts; INT64_MAX when it does not fit.
  int64_t ExpandedWork() const;
};

}  // namespace dmalab

#endif  // DMALAB_SCENARIO_H_

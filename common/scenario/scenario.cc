#include "dmalab/scenario.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/scenario/enum_names.h"

namespace dmalab {

std::string SourceLoc::ToString() const { return absl::StrFormat("%s:%d:%d", file, line, column); }

int64_t TensorDecl::elems() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string_view StepKindName(StepKind kind) { return kStepKinds.Name(kind); }

std::string_view AllReduceFormName(AllReduceForm form) { return kAllReduceForms.Name(form); }

bool Step::OnRank(int rank) const {
  return ranks.empty() || std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

std::string Step::Describe() const {
  std::string s(StepKindName(kind));
  if (!label.empty()) absl::StrAppendFormat(&s, " '%s'", label);
  if (!graph.empty()) absl::StrAppendFormat(&s, " '%s'", graph);
  if (!ranks.empty()) {
    absl::StrAppendFormat(&s, " on rank%s %s", ranks.size() > 1 ? "s" : "",
                          absl::StrJoin(ranks, ", "));
  }
  absl::StrAppendFormat(&s, " at %s", loc.ToString());
  return s;
}

const TensorDecl* Scenario::FindTensor(std::string_view name) const {
  auto it = tensors.find(std::string(name));
  return it == tensors.end() ? nullptr : &it->second;
}

namespace {

void MaxAllReduceBytesOf(const Scenario& s, const std::vector<Step>& steps, uint64_t* max_bytes) {
  for (const Step& step : steps) {
    if (step.kind == StepKind::kRepeat || step.kind == StepKind::kCaptureGraph) {
      MaxAllReduceBytesOf(s, step.body, max_bytes);
    }
    if (step.kind != StepKind::kAllReduce) continue;
    if (const TensorDecl* t = s.FindTensor(step.input))
      *max_bytes = std::max(*max_bytes, t->bytes());
  }
}

// Saturates at INT64_MAX: repeats nest without limit, their product may not fit. With
// `iterations_count`, an iteration counts as at least one step even when its body has none, so
// that nested repeats around an empty body count the product of their counts (the work of
// looping), not 0.
int64_t CountSteps(const std::vector<Step>& steps, bool iterations_count) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t n = 0;
  for (const Step& step : steps) {
    int64_t k = 1;
    if (step.kind == StepKind::kRepeat) {
      int64_t body = CountSteps(step.body, iterations_count);
      if (iterations_count) body = std::max<int64_t>(body, 1);
      k = body != 0 && step.times > kMax / body ? kMax : step.times * body;
    }
    n = k > kMax - n ? kMax : n + k;
  }
  return n;
}

}  // namespace

uint64_t Scenario::MaxAllReduceBytes() const {
  uint64_t max_bytes = 0;
  MaxAllReduceBytesOf(*this, steps, &max_bytes);
  return max_bytes;
}

int64_t Scenario::ExpandedStepCount() const { return CountSteps(steps, false); }

int64_t Scenario::ExpandedWork() const { return CountSteps(steps, true); }

}  // namespace dmalab

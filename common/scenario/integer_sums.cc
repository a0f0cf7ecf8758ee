#include "common/scenario/integer_sums.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/scenario/fill.h"

namespace dmalab {
namespace {

// A tensor whose contents are one integer fill's: its largest magnitude, and the fill step.
struct IntFill {
  int64_t bound = 0;
  const Step* fill = nullptr;
};

class Walk {
 public:
  explicit Walk(const Scenario& s) : s_(s) {}

  void Steps(const std::vector<Step>& steps) {
    for (const Step& step : steps) One(step);
  }

  std::vector<std::string> warnings;

 private:
  void One(const Step& step) {
    switch (step.kind) {
      case StepKind::kFill:
        if (step.fill_kind == FillKind::kInt) {
          ints_[step.tensor] = {
              static_cast<int64_t>(std::max(std::abs(step.lo), std::abs(step.hi))), &step};
        } else {
          ints_.erase(step.tensor);
        }
        return;
      case StepKind::kAllReduce:
        Check(step);
        // The output holds a sum, no longer one fill (in place: the input itself).
        ints_.erase(step.form == AllReduceForm::kDefault ? step.result
                    : step.form == AllReduceForm::kOut   ? step.out
                                                         : step.input);
        return;
      case StepKind::kAdd:
        ints_.erase(step.dst);
        return;
      case StepKind::kRelease:
        ints_.erase(step.tensor);
        return;
      case StepKind::kRepeat:
      case StepKind::kCaptureGraph:
        Steps(step.body);
        return;
      default:
        return;
    }
  }

  void Check(const Step& step) {
    const auto it = ints_.find(step.input);
    if (it == ints_.end() || s_.wire != WireMode::kNative) return;
    const TensorDecl* decl = s_.FindTensor(step.input);
    if (decl == nullptr) return;
    const int64_t limit = ExactIntegerLimit(decl->dtype);
    const int64_t reach = it->second.bound * s_.world;
    if (reach <= limit || !warned_.insert(&step).second) return;
    const auto src = step.sources.find("input");
    const std::string where =
        src != step.sources.end()
            ? absl::StrFormat("%s: field '%s'", src->second.loc.ToString(), src->second.path)
            : absl::StrFormat("%s: step '%s'", step.loc.ToString(), step.path);
    warnings.push_back(absl::StrFormat(
        "%s: tensor '%s' holds the integers of the fill at %s, up to %d in magnitude; their sum "
        "over %d ranks reaches %d, past %s's exact integer range (%d), so this all-reduce's "
        "output is not checked against its exact sum (wrong_sum); fill within %d (%d / %d) to "
        "have it checked",
        where, step.input, it->second.fill->loc.ToString(), it->second.bound, s_.world, reach,
        DTypeName(decl->dtype), limit, limit / s_.world, limit, s_.world));
  }

  const Scenario& s_;
  std::map<std::string, IntFill> ints_;
  std::set<const Step*> warned_;
};

}  // namespace

std::vector<std::string> IntegerSumWarnings(const Scenario& scenario) {
  Walk walk(scenario);
  walk.Steps(scenario.steps);
  return std::move(walk.warnings);
}

}  // namespace dmalab

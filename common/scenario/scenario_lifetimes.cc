#include "common/scenario/scenario_lifetimes.h"

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/core/status_macros.h"

namespace dmalab {
namespace {

// Tensors are live per rank: a step with `ranks:` allocates or frees on those ranks only.
using RankMask = uint32_t;  // bit r: rank r (world <= 16)

struct State {
  std::map<std::string, RankMask> live;  // no entry: live on no rank
  std::set<std::string> retained;
  bool operator==(const State&) const = default;
};

std::string RankList(RankMask mask) {
  std::vector<int> ranks;
  for (int r = 0; r < 32; ++r) {
    if (mask & (RankMask{1} << r)) ranks.push_back(r);
  }
  return absl::StrCat(ranks.size() > 1 ? "ranks " : "rank ", absl::StrJoin(ranks, ", "));
}

class LifetimeWalk {
 public:
  explicit LifetimeWalk(int world) : all_((RankMask{1} << world) - 1) {}

  absl::Status Walk(const std::vector<Step>& steps) {
    for (const Step& step : steps) {
      DMALAB_RETURN_IF_ERROR(One(step));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Fail(const Step& step, std::string_view key, std::string_view found,
                    std::string_view allowed) const {
    const FieldSource& src = step.sources.at(std::string(key));
    std::string where;
    if (!iteration_.empty()) {
      where = " in iteration";
      for (int64_t i : iteration_) absl::StrAppendFormat(&where, " %d", i + 1);
    }
    return absl::InvalidArgumentError(absl::StrFormat("%s: field '%s': found %s%s, allowed %s",
                                                      src.loc.ToString(), src.path, found, where,
                                                      allowed));
  }

  RankMask Live(const std::string& name) const {
    auto it = state_.live.find(name);
    return it == state_.live.end() ? 0 : it->second;
  }
  // The ranks a step runs on.
  RankMask On(const Step& step) const {
    if (step.ranks.empty()) return all_;
    RankMask m = 0;
    for (int r : step.ranks) m |= RankMask{1} << r;
    return m;
  }
  void MakeLive(const std::string& name, RankMask ranks) { state_.live[name] |= ranks; }

  // `name` is live on every rank the step runs on.
  absl::Status NeedLive(const Step& step, std::string_view key, const std::string& name) const {
    const RankMask missing = On(step) & ~Live(name);
    if (missing == 0) return absl::OkStatus();
    const std::string allowed =
        "a live tensor (made live by fill, add or an all_reduce result, not yet released)";
    if (missing == On(step)) {
      return Fail(step, key, absl::StrFormat("tensor '%s', which is not live at this step", name),
                  allowed);
    }
    return Fail(step, key,
                absl::StrFormat("tensor '%s', which is not live on %s at this step (released "
                                "there by a step with ranks:)",
                                name, RankList(missing)),
                absl::StrCat(allowed, " on every rank the step runs on"));
  }
  // `name` is live on no rank (a fresh all_reduce result).
  absl::Status NeedNotLive(const Step& step, std::string_view key, const std::string& name) const {
    const RankMask live = Live(name);
    if (live == 0) return absl::OkStatus();
    return Fail(step, key,
                live == all_ ? absl::StrFormat("tensor '%s', which is still live", name)
                             : absl::StrFormat("tensor '%s', which is still live on %s", name,
                                               RankList(live)),
                "a tensor that is not live (release it first)");
  }

  absl::Status NeedRetained(const Step& step, const std::string& name) const {
    if (state_.retained.count(name) > 0) return absl::OkStatus();
    return Fail(step, "tensor", absl::StrFormat("tensor '%s', which is not retained", name),
                "a tensor retained by an earlier retain step");
  }

  absl::Status One(const Step& step) {
    if (in_capture_ && !step.ranks.empty()) {
      return Fail(step, "ranks",
                  absl::StrFormat("ranks: on step '%s' inside capture_graph '%s'",
                                  StepKindName(step.kind), capture_name_),
                  "ranks: outside captures (a graph's launch replays its device work on every "
                  "rank)");
    }
    switch (step.kind) {
      case StepKind::kFill:
        MakeLive(step.tensor, On(step));
        return absl::OkStatus();
      case StepKind::kAllReduce:
        DMALAB_RETURN_IF_ERROR(NeedLive(step, "input", step.input));
        if (step.form == AllReduceForm::kOut) {
          if (step.out == step.input) {
            return Fail(step, "out", absl::StrFormat("'%s', the input itself", step.out),
                        "another tensor (write in_place: true for an in-place all-reduce)");
          }
          return NeedLive(step, "out", step.out);
        }
        if (step.form == AllReduceForm::kDefault) {
          DMALAB_RETURN_IF_ERROR(NeedNotLive(step, "result", step.result));
          MakeLive(step.result, all_);
          if (in_capture_) made_in_capture_.insert(step.result);
        }
        return absl::OkStatus();
      case StepKind::kRetain:
        DMALAB_RETURN_IF_ERROR(NeedLive(step, "tensor", step.tensor));
        if (state_.retained.count(step.tensor) > 0) {
          return Fail(step, "tensor",
                      absl::StrFormat("tensor '%s', which is already retained", step.tensor),
                      "a tensor that is not retained (unretain it first)");
        }
        state_.retained.insert(step.tensor);
        return absl::OkStatus();
      case StepKind::kUnretain:
        DMALAB_RETURN_IF_ERROR(NeedRetained(step, step.tensor));
        state_.retained.erase(step.tensor);
        return absl::OkStatus();
      case StepKind::kRelease:
        DMALAB_RETURN_IF_ERROR(NeedLive(step, "tensor", step.tensor));
        if (On(step) != all_ && state_.retained.count(step.tensor) > 0) {
          return Fail(step, "ranks",
                      absl::StrFormat("a release on %s of tensor '%s', which is retained",
                                      RankList(On(step)), step.tensor),
                      "a release on some ranks of a tensor that is not retained (a retained "
                      "tensor is checked on every rank: unretain it first)");
        }
        if (in_capture_ && made_in_capture_.count(step.tensor) == 0) {
          return Fail(step, "tensor",
                      absl::StrFormat("tensor '%s' inside capture_graph '%s', made outside it",
                                      step.tensor, capture_name_),
                      "the release of an all_reduce result made earlier in the same capture (its "
                      "block returns to the graph's private pool); release the others before or "
                      "after the capture");
        }
        if ((state_.live[step.tensor] &= ~On(step)) == 0) state_.live.erase(step.tensor);
        state_.retained.erase(step.tensor);
        return absl::OkStatus();
      case StepKind::kAdd:
        if (in_capture_) {  // a graph allocates nothing: dst must be live already
          DMALAB_RETURN_IF_ERROR(NeedLive(step, "dst", step.dst));
        }
        DMALAB_RETURN_IF_ERROR(NeedLive(step, "a", step.a));
        DMALAB_RETURN_IF_ERROR(NeedLive(step, "b", step.b));
        MakeLive(step.dst, On(step));
        return absl::OkStatus();
      case StepKind::kExpectUnchanged:
        return NeedRetained(step, step.tensor);
      case StepKind::kExpectEqual:
        DMALAB_RETURN_IF_ERROR(NeedLive(step, "a", step.a));
        return NeedLive(step, "b", step.b);
      case StepKind::kRepeat:
        iteration_.push_back(0);
        for (int64_t i = 0; i < step.times; ++i) {
          iteration_.back() = i;
          const State before = state_;
          DMALAB_RETURN_IF_ERROR(Walk(step.body));
          // The walk is a function of the state: once an iteration leaves it unchanged, every
          // later iteration does too.
          if (state_ == before) break;
        }
        iteration_.pop_back();
        return absl::OkStatus();
      case StepKind::kCaptureGraph:
        if (!iteration_.empty()) {
          return Fail(step, "name",
                      absl::StrFormat("capture of graph '%s' inside a repeat", step.graph),
                      "a capture outside repeat (capture once, launch it inside a repeat)");
        }
        if (!graphs_.insert(step.graph).second) {
          return Fail(step, "name",
                      absl::StrFormat("graph '%s', which is already captured", step.graph),
                      "a new graph name");
        }
        // The body's tensors must be live when it is captured; a graph launched after one of
        // them was released is a bug the replay's checkers report, not bad input.
        in_capture_ = true;
        capture_name_ = step.graph;
        made_in_capture_.clear();
        DMALAB_RETURN_IF_ERROR(Walk(step.body));
        in_capture_ = false;
        return absl::OkStatus();
      case StepKind::kLaunchGraph:
        if (graphs_.count(step.graph) > 0) return absl::OkStatus();
        return Fail(step, "name", absl::StrFormat("graph '%s', which is not captured", step.graph),
                    "the name of a graph captured by an earlier capture_graph step");
    }
    return absl::OkStatus();
  }

  const RankMask all_;
  State state_;
  std::vector<int64_t> iteration_;
  std::set<std::string> graphs_;  // captured so far
  bool in_capture_ = false;
  std::string capture_name_;
  std::set<std::string> made_in_capture_;  // results made in the capture being walked
};

}  // namespace

absl::Status CheckLifetimes(const Scenario& scenario) {
  return LifetimeWalk(scenario.world).Walk(scenario.steps);
}

}  // namespace dmalab

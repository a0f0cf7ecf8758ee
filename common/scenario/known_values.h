// What the replay knows of a tensor's values without reading the device: the checks behind the
// `wrong_sum` and `non_finite` findings (docs/design.md section 5).
//
// Reading a tensor back synchronizes the device, which would order work the replay must leave
// unordered (an input produced by an add and consumed by the collective), so the replay follows
// values symbolically instead, step by step:
//   - a bound B on the magnitude of every element of every rank (infinity: nothing known). A fill
//     in [lo, hi] gives max(|lo|, |hi|); a rounded sum gives (Ba + Bb)(1 + 2^-7), room for any
//     dtype's rounding; an all-reduce's output 2 W B, room for any wire's rounding as well.
//   - for integers that every step computed exactly, the exact value: per rank a sum of integer
//     fills with integer coefficients. A kInt fill is exact; a + b is exact when both are and
//     Ba + Bb is within the dtype's exact integer range (ExactIntegerLimit), so that any order of
//     additions gives the same bits; an all-reduce's output is the sum of every rank's terms when
//     W B is within that range and the wire carries the dtype itself (compressed wires round).
//     At most kMaxTerms terms per rank (the cost of computing an expected value); beyond, only
//     the bound is kept.
// An all-reduce output whose exact value is known must equal it on every rank (`wrong_sum`);
// one whose bound is finite must hold no NaN or infinity (`non_finite`).
#ifndef DMALAB_COMMON_SCENARIO_KNOWN_VALUES_H_
#define DMALAB_COMMON_SCENARIO_KNOWN_VALUES_H_

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/types/span.h"
#include "common/core/dtype.h"
#include "dmalab/scenario.h"

namespace dmalab {

// The largest finite magnitude of a dtype (bf16 and fp32 3.4e38, fp16 65504).
double MaxFinite(DType dtype);

class KnownValues {
 public:
  // Terms of one rank's exact value at most; beyond, the value is only bounded.
  static constexpr size_t kMaxTerms = 64;

  // Nothing known.
  KnownValues() = default;

  // A fill of `kind` in [lo, hi]; keys[r] is rank r's generator key (FillKey).
  static KnownValues Fill(FillKind kind, double lo, double hi, std::vector<uint64_t> keys);
  // dst = a + b on every rank, rounded to `dtype`.
  static KnownValues Add(const KnownValues& a, const KnownValues& b, DType dtype);
  // Every rank's output of an all-reduce of `in` over `world` ranks; `exact_wire`: the wire
  // carries the dtype itself (no compression).
  static KnownValues AllReduce(const KnownValues& in, int world, DType dtype, bool exact_wire);

  // Rank r's values from `updated` where take[r], from `old` elsewhere (a step on some ranks).
  static KnownValues Select(const KnownValues& old, const KnownValues& updated,
                            const std::vector<bool>& take);

  // Every element of every rank is at most this in magnitude (infinity: not known).
  double bound() const { return bound_; }
  // Every rank's exact value is known.
  bool exact() const { return !ranks_.empty(); }
  // Whether ranks r and q have the same exact value (the same terms); exact() only.
  bool SameAs(int r, int q) const { return ranks_[r] == ranks_[q]; }
  // acc[i] = rank r's exact value of element i, for i < acc.size(); exact() only.
  void Exact(int rank, absl::Span<int64_t> acc) const { Exact(rank, 0, acc); }
  // acc[i] = rank r's exact value of element first + i, for i < acc.size(); exact() only.
  void Exact(int rank, int64_t first, absl::Span<int64_t> acc) const;

 private:
  // One integer fill of one rank: its generator key and range.
  struct IntFill {
    uint64_t key = 0;
    int64_t lo = 0, hi = 0;
    bool operator<(const IntFill& o) const {
      return std::tie(key, lo, hi) < std::tie(o.key, o.lo, o.hi);
    }
  };
  using Terms = std::map<IntFill, int64_t>;  // fill -> coefficient

  std::vector<std::shared_ptr<const Terms>> ranks_;  // empty: not exact
  double bound_ = std::numeric_limits<double>::infinity();
};

}  // namespace dmalab

#endif  // DMALAB_COMMON_SCENARIO_KNOWN_VALUES_H_

#include "common/scenario/known_values.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "common/scenario/fill.h"

namespace dmalab {

namespace {

// Room for one rounding of any dtype (unit roundoff at most 2^-8, bf16's).
constexpr double kRounding = 1.0 + 1.0 / 128.0;

}  // namespace

double MaxFinite(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return static_cast<double>(BitsToFloat(0x7f7f0000u));  // 0x7f7f, widened exactly
    case DType::kFP16:
      return 65504.0;
    case DType::kFP32:
      return static_cast<double>(std::numeric_limits<float>::max());
  }
  return 0.0;
}

KnownValues KnownValues::Fill(FillKind kind, double lo, double hi, std::vector<uint64_t> keys) {
  KnownValues k;
  k.bound_ = std::max(std::fabs(lo), std::fabs(hi));
  if (kind != FillKind::kInt) {
    k.bound_ *= kRounding;  // rounded to fp32, then to the dtype
    return k;
  }
  for (uint64_t key : keys) {
    auto terms = std::make_shared<Terms>();
    (*terms)[IntFill{key, static_cast<int64_t>(lo), static_cast<int64_t>(hi)}] = 1;
    k.ranks_.push_back(std::move(terms));
  }
  return k;
}

KnownValues KnownValues::Add(const KnownValues& a, const KnownValues& b, DType dtype) {
  KnownValues k;
  const double sum = a.bound_ + b.bound_;
  k.bound_ = sum * kRounding;
  if (!a.exact() || !b.exact() || sum > static_cast<double>(ExactIntegerLimit(dtype))) return k;
  for (size_t r = 0; r < a.ranks_.size(); ++r) {
    auto terms = std::make_shared<Terms>(*a.ranks_[r]);
    for (const auto& [fill, coeff] : *b.ranks_[r]) (*terms)[fill] += coeff;
    if (terms->size() > kMaxTerms) return k;
    k.ranks_.push_back(std::move(terms));
  }
  k.bound_ = sum;  // integers within the exact range: no rounding
  return k;
}

KnownValues KnownValues::AllReduce(const KnownValues& in, int world, DType dtype, bool exact_wire) {
  KnownValues k;
  if (exact_wire && in.exact()) {
    const double sum = world * in.bound_;
    auto terms = std::make_shared<Terms>();
    for (const auto& rank : in.ranks_) {
      for (const auto& [fill, coeff] : *rank) (*terms)[fill] += coeff;
    }
    if (sum <= static_cast<double>(ExactIntegerLimit(dtype)) && terms->size() <= kMaxTerms) {
      k.bound_ = sum;
      k.ranks_.assign(world, std::move(terms));  // every rank: the same value
      return k;
    }
  }
  k.bound_ = 2.0 * world * in.bound_;
  return k;
}

KnownValues KnownValues::Select(const KnownValues& old, const KnownValues& updated,
                                const std::vector<bool>& take) {
  KnownValues k;
  k.bound_ = std::max(old.bound_, updated.bound_);
  if (!old.exact() || !updated.exact()) return k;
  for (size_t r = 0; r < take.size(); ++r) {
    k.ranks_.push_back(take[r] ? updated.ranks_[r] : old.ranks_[r]);
  }
  return k;
}

void KnownValues::Exact(int rank, int64_t first, absl::Span<int64_t> acc) const {
  std::fill(acc.begin(), acc.end(), 0);
  for (const auto& [fill, coeff] : *ranks_[rank]) {
    AccumulateIntFill(static_cast<double>(fill.lo), static_cast<double>(fill.hi), fill.key, coeff,
                      first, acc);
  }
}

}  // namespace dmalab

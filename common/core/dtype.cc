#include "common/core/dtype.h"

#include <cstring>

#include "common/core/enum_names.h"

namespace dmalab {

std::string_view DTypeName(DType t) { return kDTypes.Name(t); }

absl::StatusOr<DType> ParseDType(std::string_view name) { return kDTypes.Parse(name); }

namespace {

// CountNonFinite for one width: `exponent` holds the exponent bits. A branch-free count first
// (the compiler vectorizes it); the first one is looked for only when there is one.
template <typename Bits>
NonFiniteCount CountWithExponent(const uint8_t* base, int64_t elems, Bits exponent) {
  const auto non_finite = [&](int64_t i) {
    Bits v;
    std::memcpy(&v, base + i * static_cast<int64_t>(sizeof(Bits)), sizeof(Bits));
    return (v & exponent) == exponent;
  };
  NonFiniteCount out;
  for (int64_t i = 0; i < elems; ++i) out.count += non_finite(i) ? 1 : 0;
  for (int64_t i = 0; out.count > 0 && out.first < 0; ++i) {
    if (non_finite(i)) out.first = i;
  }
  return out;
}

}  // namespace

NonFiniteCount CountNonFinite(DType t, const void* base, int64_t elems) {
  const auto* bytes = static_cast<const uint8_t*>(base);
  switch (t) {
    case DType::kBF16:
      return CountWithExponent<uint16_t>(bytes, elems, 0x7f80);
    case DType::kFP16:
      return CountWithExponent<uint16_t>(bytes, elems, 0x7c00);
    case DType::kFP32:
      return CountWithExponent<uint32_t>(bytes, elems, 0x7f800000u);
  }
  return {};
}

}  // namespace dmalab

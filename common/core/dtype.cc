#include "common/core/dtype.h"

#include "absl/strings/str_format.h"

namespace dmalab {

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kBF16:
      return "bf16";
    case DType::kFP16:
      return "fp16";
    case DType::kFP32:
      return "fp32";
  }
  return "?";
}

absl::StatusOr<DType> ParseDType(std::string_view name) {
  if (name == "bf16") return DType::kBF16;
  if (name == "fp16") return DType::kFP16;
  if (name == "fp32") return DType::kFP32;
  return absl::InvalidArgumentError(
      absl::StrFormat("dtype '%s' is not known; allowed: bf16, fp16, fp32", name));
}

float FP16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return BitsToFloat(sign | 0x7f800000u | (mant << 13));  // inf or NaN
  if (exp != 0) return BitsToFloat(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return BitsToFloat(sign);
  // Subnormal: normalise.
  int e = -1;
  do {
    ++e;
    mant <<= 1;
  } while ((mant & 0x400u) == 0);
  return BitsToFloat(sign | ((112u - static_cast<uint32_t>(e)) << 23) | ((mant & 0x3ffu) << 13));
}

uint16_t FloatToFP16(float f) {
  const uint32_t u = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to infinity
  if (abs >= 0x38800000u) {                                              // normal fp16
    const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  if (abs < 0x33000000u) return sign;  // below half the smallest subnormal: zero
  // Subnormal fp16: shift the implicit-one mantissa right, round to nearest even.
  const uint32_t exp = abs >> 23;
  const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - exp;  // 14..24
  const uint32_t half = 1u << (shift - 1);
  const uint32_t rest = mant & ((1u << shift) - 1u);
  uint32_t q = mant >> shift;
  if (rest > half || (rest == half && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

}  // namespace dmalab

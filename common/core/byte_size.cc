#include "common/core/byte_size.h"

#include "absl/strings/str_format.h"

namespace dmalab {
namespace {

int SuffixShift(char c) {
  switch (c) {
    case 'K':
    case 'k':
      return 10;
    case 'M':
    case 'm':
      return 20;
    case 'G':
    case 'g':
      return 30;
    default:
      return 0;
  }
}

}  // namespace

absl::StatusOr<uint64_t> ParseByteSize(std::string_view text, uint64_t min, uint64_t max) {
  const auto range = [&] {
    return absl::StrFormat("allowed: %s to %s", DescribeByteSize(min), DescribeByteSize(max));
  };
  const auto malformed = [&] {
    return absl::InvalidArgumentError(absl::StrFormat(
        "size '%s' is not a whole number of bytes with an optional K, M or G suffix (binary "
        "multiples, either case); %s",
        std::string(text), range()));
  };
  if (text.empty()) return malformed();
  const int shift = SuffixShift(text.back());
  const std::string_view digits = shift ? text.substr(0, text.size() - 1) : text;
  if (digits.empty()) return malformed();
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  uint64_t v = 0;
  bool overflow = false;
  for (char c : digits) {
    if (c < '0' || c > '9') return malformed();
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (kMax - d) / 10) overflow = true;
    if (!overflow) v = v * 10 + d;
  }
  if (!overflow && shift > 0 && v > (kMax >> shift)) overflow = true;
  if (overflow) {
    return absl::InvalidArgumentError(
        absl::StrFormat("size '%s' is more than 2^64 - 1 bytes; %s", std::string(text), range()));
  }
  v <<= shift;
  if (v < min || v > max) {
    return absl::InvalidArgumentError(
        absl::StrFormat("size '%s' is %s; %s", std::string(text), DescribeByteSize(v), range()));
  }
  return v;
}

std::string FormatByteSize(uint64_t bytes) {
  if (bytes == 0) return "0";
  for (const auto& [shift, suffix] : {std::pair{30, 'G'}, std::pair{20, 'M'}, std::pair{10, 'K'}}) {
    if (bytes % (uint64_t{1} << shift) == 0) {
      return absl::StrFormat("%d%c", bytes >> shift, suffix);
    }
  }
  return absl::StrFormat("%d", bytes);
}

std::string DescribeByteSize(uint64_t bytes) {
  if (bytes == std::numeric_limits<uint64_t>::max()) return "2^64 - 1 B";
  if (bytes == 0) return "0 B";
  for (const auto& [shift, unit] :
       {std::pair{30, "GiB"}, std::pair{20, "MiB"}, std::pair{10, "KiB"}}) {
    if (bytes % (uint64_t{1} << shift) == 0) {
      return absl::StrFormat("%d %s", bytes >> shift, unit);
    }
  }
  return absl::StrFormat("%d B", bytes);
}

}  // namespace dmalab

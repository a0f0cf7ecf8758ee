#include "common/core/hash.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>

#include "absl/strings/str_format.h"

namespace dmalab {
namespace {

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kP3 = 0x165667B19E3779F9ull;
constexpr uint64_t kP4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t kP5 = 0x27D4EB2F165667C5ull;

inline uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// Little-endian loads (the hash is defined on little-endian words).
inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}
inline uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
  return v;
}

inline uint64_t Round(uint64_t acc, uint64_t input) {
  acc += input * kP2;
  acc = Rotl(acc, 31);
  return acc * kP1;
}

inline uint64_t MergeRound(uint64_t acc, uint64_t val) {
  acc ^= Round(0, val);
  return acc * kP1 + kP4;
}

// The four lanes' accumulators as one, for an input of a stripe or more.
inline uint64_t MergeLanes(uint64_t v1, uint64_t v2, uint64_t v3, uint64_t v4) {
  uint64_t h = Rotl(v1, 1) + Rotl(v2, 7) + Rotl(v3, 12) + Rotl(v4, 18);
  h = MergeRound(h, v1);
  h = MergeRound(h, v2);
  h = MergeRound(h, v3);
  h = MergeRound(h, v4);
  return h;
}

// Mixes in [p, end), the input's last bytes (fewer than a stripe), and avalanches.
inline uint64_t Finish(uint64_t h, const uint8_t* p, const uint8_t* end) {
  while (p + 8 <= end) {
    h ^= Round(0, Load64(p));
    h = Rotl(h, 27) * kP1 + kP4;
    p += 8;
  }
  if (p + 4 <= end) {
    h ^= static_cast<uint64_t>(Load32(p)) * kP1;
    h = Rotl(h, 23) * kP2 + kP3;
    p += 4;
  }
  while (p < end) {
    h ^= static_cast<uint64_t>(*p) * kP5;
    h = Rotl(h, 11) * kP1;
    ++p;
  }
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

}  // namespace

uint64_t Xxh64(absl::Span<const uint8_t> bytes, uint64_t seed) {
  const uint8_t* p = bytes.data();
  const uint8_t* const end = p + bytes.size();
  uint64_t h;
  if (bytes.size() >= 32) {
    uint64_t v1 = seed + kP1 + kP2;
    uint64_t v2 = seed + kP2;
    uint64_t v3 = seed;
    uint64_t v4 = seed - kP1;
    const uint8_t* const limit = end - 32;
    do {
      v1 = Round(v1, Load64(p));
      v2 = Round(v2, Load64(p + 8));
      v3 = Round(v3, Load64(p + 16));
      v4 = Round(v4, Load64(p + 24));
      p += 32;
    } while (p <= limit);
    h = MergeLanes(v1, v2, v3, v4);
  } else {
    h = seed + kP5;
  }
  return Finish(h + static_cast<uint64_t>(bytes.size()), p, end);
}

Xxh64Hasher::Xxh64Hasher(uint64_t seed)
    : seed_(seed), lanes_{seed + kP1 + kP2, seed + kP2, seed, seed - kP1} {}

void Xxh64Hasher::Update(absl::Span<const uint8_t> bytes) {
  if (bytes.empty()) return;
  const uint8_t* p = bytes.data();
  const uint8_t* const end = p + bytes.size();
  total_ += bytes.size();
  const auto stripe = [this](const uint8_t* s) {
    lanes_[0] = Round(lanes_[0], Load64(s));
    lanes_[1] = Round(lanes_[1], Load64(s + 8));
    lanes_[2] = Round(lanes_[2], Load64(s + 16));
    lanes_[3] = Round(lanes_[3], Load64(s + 24));
  };
  // Complete the stripe an earlier piece began.
  if (tail_size_ > 0) {
    const size_t take = std::min(kStripe - tail_size_, bytes.size());
    std::memcpy(tail_ + tail_size_, p, take);
    tail_size_ += take;
    p += take;
    if (tail_size_ < kStripe) return;
    stripe(tail_);
    tail_size_ = 0;
  }
  for (; end - p >= static_cast<ptrdiff_t>(kStripe); p += kStripe) stripe(p);
  std::memcpy(tail_, p, end - p);
  tail_size_ = end - p;
}

uint64_t Xxh64Hasher::Digest() const {
  const uint64_t h =
      total_ >= kStripe ? MergeLanes(lanes_[0], lanes_[1], lanes_[2], lanes_[3]) : seed_ + kP5;
  return Finish(h + total_, tail_, tail_ + tail_size_);
}

std::string HashString(uint64_t hash) { return absl::StrFormat("xxh64:%016x", hash); }

}  // namespace dmalab

// CudaDevice::Reduce with block-coded operands (INT8 and E4M3) against ReduceHost, bit for bit:
// quantize, dequantize, ring hop, last hop, a2a, in place, on random values, random bit
// patterns and edge blocks (NaN, inf, subnormals, -0, all-zero blocks, huge values), aligned
// and unaligned addresses. Skips without a GPU.
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/core/codec.h"
#include "common/core/reduce_host.h"
#include "gtest/gtest.h"
#include "hw/cuda_device.h"
#include "tests/hw/codec_operands.h"
#include "tests/hw/gpu_test_support.h"

namespace dmalab {
namespace {

using ::dmalab::testing::Bytes;
using ::dmalab::testing::InputKind;
using ::dmalab::testing::InputKindName;
using ::dmalab::testing::kInputKinds;
using ::dmalab::testing::RandomOperand;
using ::dmalab::testing::ReadVector;
using ::dmalab::testing::WriteVector;

constexpr Codec kI8 = Codec::kInt8Block;
constexpr Codec kE4 = Codec::kE4M3Block;
constexpr Codec kPl = Codec::kPlain;

struct Case {
  std::string name;
  Codec dst;
  std::vector<Codec> terms;
  bool in_place = false;  // dst is term 0 (same codec)
};

// The hops of the compressed wire modes, for block codec `b`.
std::vector<Case> HopCases(Codec b) {
  const std::string c(CodecName(b));
  return {
      {c + " quantize", b, {kPl}},
      {c + " dequantize", kPl, {b}},
      {c + " requantize", b, {b}},
      {c + " ring hop", b, {b, kPl}},
      {c + " ring hop, plain first", b, {kPl, b}},
      {c + " last hop", kPl, {b, kPl}},
      {c + " a2a", kPl, {b, b, b, kPl}},
      {c + " a2a into blocks", b, {b, b, b, kPl}},
      {c + " ring hop in place", b, {b, kPl}, true},
      {c + " last hop in place", kPl, {kPl, b}, true},
      {c + " requantize in place", b, {b}, true},
  };
}

// Runs one case on the GPU with operands placed `offset` bytes into their allocations and
// compares dst's bytes (values and scales) with ReduceHost's.
// For a failure: the 128-value block holding byte `at` of dst, with every term's encoded
// inputs of that block and the host's and the GPU's bytes, so a mismatch can be reproduced.
std::string DescribeBlock(const Case& c, const std::vector<Bytes>& terms, const Bytes& want,
                          const Bytes& got, int64_t elems, int64_t at) {
  if (at < 0) return "";
  const bool dst_blocks = c.dst != Codec::kPlain;
  const int64_t value_bytes = dst_blocks ? elems : elems * 2;
  const int64_t block = at < value_bytes ? at / (dst_blocks ? 128 : 256) : (at - elems) / 4;
  std::string out = absl::StrFormat("\nblock %d:", block);
  auto dump = [&](const char* name, const Bytes& b, Codec codec) {
    absl::StrAppendFormat(&out, "\n %s:", name);
    if (codec == Codec::kPlain) {
      for (int i = 0; i < 128; ++i) {
        uint16_t h;
        std::memcpy(&h, b.data() + (block * 128 + i) * 2, 2);
        absl::StrAppendFormat(&out, " %04x", h);
      }
    } else {
      uint32_t scale;
      std::memcpy(&scale, b.data() + elems + block * 4, 4);
      absl::StrAppendFormat(&out, " scale=%08x q:", scale);
      for (int i = 0; i < 128; ++i) absl::StrAppendFormat(&out, " %02x", b[block * 128 + i]);
    }
  };
  for (size_t t = 0; t < terms.size(); ++t)
    dump(absl::StrFormat("term%d", t).c_str(), terms[t], c.terms[t]);
  dump("host", want, c.dst);
  dump("gpu", got, c.dst);
  return out;
}

void CheckOnGpu(CudaDevice& device, std::mt19937_64& rng, const Case& c, InputKind kind,
                int64_t elems, uint64_t offset) {
  const std::string what =
      absl::StrFormat("%s, %s, %d elems, offset %d", c.name, InputKindName(kind), elems, offset);
  std::vector<Bytes> terms;
  for (Codec codec : c.terms) terms.push_back(RandomOperand(rng, codec, kind, elems));
  const uint64_t dst_bytes = EncodedBytes(c.dst, DType::kBF16, elems);
  Bytes want = c.in_place ? terms[0] : Bytes(dst_bytes, 0xcd);
  std::vector<HostOperand> host_terms;
  for (size_t t = 0; t < terms.size(); ++t) {
    host_terms.push_back({t == 0 && c.in_place ? want.data() : terms[t].data(), c.terms[t]});
  }
  ASSERT_TRUE(ReduceHost(DType::kBF16, want.data(), c.dst, host_terms, elems).ok()) << what;

  std::vector<MemRef> allocations;
  std::vector<Operand> operands;
  for (size_t t = 0; t < terms.size(); ++t) {
    MemRef m = *device.Allocate(0, offset + terms[t].size(), "term");
    allocations.push_back(m);
    Bytes padded(offset, 0xee);
    padded.insert(padded.end(), terms[t].begin(), terms[t].end());
    ASSERT_TRUE(WriteVector(device, m, padded).ok()) << what;
    operands.push_back({m.Slice(offset, terms[t].size()), c.terms[t]});
  }
  Operand dst = operands[0];
  if (!c.in_place) {
    MemRef m = *device.Allocate(0, offset + dst_bytes, "dst");
    allocations.push_back(m);
    ASSERT_TRUE(WriteVector(device, m, Bytes(offset + dst_bytes, 0xcd)).ok()) << what;
    dst = {m.Slice(offset, dst_bytes), c.dst};
  }
  const absl::Status s =
      device.Reduce(device.ComputeStream(0), DType::kBF16, dst, operands, elems, "test");
  ASSERT_TRUE(s.ok()) << what << ": " << s;
  absl::StatusOr<Bytes> got = ReadVector<uint8_t>(device, dst.mem);
  ASSERT_TRUE(got.ok()) << got.status();
  int64_t mismatches = 0;
  int64_t first = -1;
  for (size_t i = 0; i < want.size(); ++i) {
    if ((*got)[i] != want[i]) {
      if (mismatches++ == 0) first = static_cast<int64_t>(i);
    }
  }
  EXPECT_EQ(mismatches, 0) << what << ": first differing byte " << first << " of " << want.size()
                           << DescribeBlock(c, terms, want, *got, elems, first);
  for (const MemRef& m : allocations) ASSERT_TRUE(device.Free(m).ok());
}

TEST(BlockReduceKernelTest, EveryWireHopMatchesHostOnRandomAndEdgeInputs) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 1, 1);
  std::mt19937_64 rng(21);
  for (Codec b : {kI8, kE4}) {
    for (const Case& c : HopCases(b)) {
      for (InputKind kind : kInputKinds) {
        for (int64_t elems : {128, 128 * 33, 128 * 8192}) {
          ASSERT_NO_FATAL_FAILURE(CheckOnGpu(*device, rng, c, kind, elems, 0));
        }
      }
    }
  }
}

TEST(BlockReduceKernelTest, UnalignedOperandsMatchHost) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 1, 1);
  std::mt19937_64 rng(22);
  for (Codec b : {kI8, kE4}) {
    for (const Case& c : HopCases(b)) {
      for (uint64_t offset : {1, 2, 4}) {
        ASSERT_NO_FATAL_FAILURE(CheckOnGpu(*device, rng, c, InputKind::kBits, 128 * 100, offset));
      }
    }
  }
}

TEST(BlockReduceKernelTest, RandomMixesOfUpToSixteenTermsMatchHost) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 1, 1);
  std::mt19937_64 rng(23);
  const Codec codecs[] = {kPl, kI8, kE4};
  for (int n = 0; n < 60; ++n) {
    Case c;
    c.dst = codecs[rng() % 3];
    const int num_terms = n < 6 ? 16 : 1 + static_cast<int>(rng() % 5);
    for (int t = 0; t < num_terms; ++t) c.terms.push_back(codecs[rng() % 3]);
    c.terms[0] = n % 2 == 0 ? kI8 : kE4;  // at least one block-coded operand
    c.in_place = n % 5 == 0;
    if (c.in_place) c.dst = c.terms[0];
    c.name = absl::StrFormat("mix %d (%d terms)", n, num_terms);
    ASSERT_NO_FATAL_FAILURE(CheckOnGpu(*device, rng, c, kInputKinds[n % 3],
                                       128 * (1 + static_cast<int64_t>(rng() % 300)), 0));
  }
}

TEST(BlockReduceKernelTest, RefusesATermThatOverlapsDstWithoutBeingIt) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 1, 1);
  const int64_t elems = 256;
  MemRef m = *device->Allocate(0, 4 * elems, "buffer");
  const Operand blocks = {m.Slice(0, EncodedBytes(kI8, DType::kBF16, elems)), kI8};
  const Operand plain = {m.Slice(0, 2 * elems), kPl};
  const Operand shifted = {m.Slice(128, EncodedBytes(kI8, DType::kBF16, elems)), kI8};
  EXPECT_TRUE(absl::IsInvalidArgument(
      device->Reduce(device->ComputeStream(0), DType::kBF16, blocks, {&plain, 1}, elems, "x")));
  EXPECT_TRUE(absl::IsInvalidArgument(
      device->Reduce(device->ComputeStream(0), DType::kBF16, blocks, {&shifted, 1}, elems, "x")));
  EXPECT_TRUE(
      device->Reduce(device->ComputeStream(0), DType::kBF16, blocks, {&blocks, 1}, elems, "x")
          .ok());
  ASSERT_TRUE(device->Synchronize().ok());
  ASSERT_TRUE(device->Free(m).ok());
}

}  // namespace
}  // namespace dmalab

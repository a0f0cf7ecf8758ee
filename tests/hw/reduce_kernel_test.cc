// The CUDA Reduce kernel against ReduceHost, bit for bit: random and edge inputs, bf16, fp16 and
// fp32, 1 to 4 (and 16) terms, aligned and unaligned sizes and addresses, in place.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/core/dtype.h"
#include "common/core/reduce_host.h"
#include "gtest/gtest.h"
#include "hw/cuda_device.h"
#include "tests/hw/gpu_test_support.h"

namespace dmalab {
namespace {

using ::dmalab::testing::ReadVector;
using ::dmalab::testing::WriteVector;

// Runs Reduce on the GPU with terms placed `offset_elems` into their allocations (to test
// unaligned addresses) and compares the output bytes with ReduceHost's.
class ReduceChecker {
 public:
  explicit ReduceChecker(CudaDevice* device) : device_(device) {}

  // terms[t] holds the raw bytes of term t; all have the same size. `in_place`: dst is term 0.
  void Check(DType dtype, const std::vector<std::vector<uint8_t>>& terms, uint64_t offset_elems,
             bool in_place, const std::string& what) {
    const uint64_t bytes = terms[0].size();
    const int64_t elems = static_cast<int64_t>(bytes / DTypeBytes(dtype));
    const uint64_t offset = offset_elems * DTypeBytes(dtype);
    std::vector<MemRef> allocations;
    std::vector<Operand> operands;
    std::vector<HostOperand> host_operands;
    for (size_t t = 0; t < terms.size(); ++t) {
      MemRef m = *device_->Allocate(0, offset + bytes, "term");
      allocations.push_back(m);
      std::vector<uint8_t> padded(offset, 0xee);
      padded.insert(padded.end(), terms[t].begin(), terms[t].end());
      ASSERT_TRUE(WriteVector(*device_, m, padded).ok());
      operands.push_back({m.Slice(offset, bytes), Codec::kPlain});
      host_operands.push_back({terms[t].data(), Codec::kPlain});
    }
    MemRef dst = operands[0].mem;
    if (!in_place) {
      MemRef out = *device_->Allocate(0, offset + bytes, "dst");
      allocations.push_back(out);
      dst = out.Slice(offset, bytes);
    }
    std::vector<uint8_t> want(bytes);
    ASSERT_TRUE(ReduceHost(dtype, want.data(), Codec::kPlain, host_operands, elems).ok());
    const absl::Status s = device_->Reduce(device_->ComputeStream(0), dtype, {dst, Codec::kPlain},
                                           operands, elems, "test");
    ASSERT_TRUE(s.ok()) << s;
    absl::StatusOr<std::vector<uint8_t>> got = ReadVector<uint8_t>(*device_, dst);
    ASSERT_TRUE(got.ok()) << got.status();
    size_t mismatches = 0;
    size_t first = 0;
    const size_t width = DTypeBytes(dtype);
    for (size_t i = 0; i < bytes; i += width) {
      if (std::memcmp(&(*got)[i], &want[i], width) != 0) {
        if (mismatches++ == 0) first = i / width;
      }
    }
    EXPECT_EQ(mismatches, 0u) << what << ": first mismatch at element " << first;
    for (const MemRef& m : allocations) ASSERT_TRUE(device_->Free(m).ok());
  }

 private:
  CudaDevice* device_;
};

std::vector<uint8_t> RandomBytes(std::mt19937_64& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// Values of realistic magnitude (normal(0, 1) rounded to the dtype), where sums round often.
std::vector<uint8_t> RandomValues(std::mt19937_64& rng, DType dtype, int64_t elems) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint8_t> v(static_cast<size_t>(elems) * DTypeBytes(dtype));
  for (int64_t i = 0; i < elems; ++i) StoreFromFloat(dtype, v.data(), i, normal(rng));
  return v;
}

TEST(ReduceKernelTest, MatchesHostOnRandomInputsForEveryDtypeTermCountSizeAndAlignment) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 1, 1);
  ReduceChecker checker(device.get());
  std::mt19937_64 rng(1234);
  for (DType dtype : {DType::kBF16, DType::kFP16, DType::kFP32}) {
    for (int num_terms = 1; num_terms <= 4; ++num_terms) {
      for (int64_t elems : {1, 7, 8, 9, 1000, 4096, 4096 * 3 + 5, 1 << 20}) {
        for (uint64_t offset : {0, 1, 3}) {
          for (bool bit_patterns : {false, true}) {
            std::vector<std::vector<uint8_t>> terms;
            for (int t = 0; t < num_terms; ++t) {
              terms.push_back(bit_patterns
                                  ? RandomBytes(rng, static_cast<size_t>(elems) * DTypeBytes(dtype))
                                  : RandomValues(rng, dtype, elems));
            }
            checker.Check(dtype, terms, offset, /*in_place=*/false,
                          absl::StrFormat("%s, %d terms, %d elems, offset %d, %s", DTypeName(dtype),
                                          num_terms, elems, offset,
                                          bit_patterns ? "random bits" : "random values"));
          }
        }
      }
    }
  }
}

TEST(ReduceKernelTest, InPlaceAndSixteenTermsMatchHost) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 1, 1);
  ReduceChecker checker(device.get());
  std::mt19937_64 rng(99);
  for (DType dtype : {DType::kBF16, DType::kFP16, DType::kFP32}) {
    std::vector<std::vector<uint8_t>> two = {RandomValues(rng, dtype, 100'003),
                                             RandomValues(rng, dtype, 100'003)};
    checker.Check(dtype, two, 0, /*in_place=*/true, "in place, aligned");
    checker.Check(dtype, two, 1, /*in_place=*/true, "in place, unaligned");
    std::vector<std::vector<uint8_t>> sixteen;
    for (int t = 0; t < 16; ++t) sixteen.push_back(RandomValues(rng, dtype, 65'536));
    checker.Check(dtype, sixteen, 0, /*in_place=*/false, "16 terms");
  }
}

// Every 16-bit pattern as term 0, alone and plus each of a few special second terms.
TEST(ReduceKernelTest, MatchesHostOnEverySixteenBitPattern) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 1, 1);
  ReduceChecker checker(device.get());
  for (DType dtype : {DType::kBF16, DType::kFP16}) {
    std::vector<uint8_t> all(65536 * 2);
    for (uint32_t h = 0; h < 65536; ++h) {
      all[2 * h] = static_cast<uint8_t>(h);
      all[2 * h + 1] = static_cast<uint8_t>(h >> 8);
    }
    checker.Check(dtype, {all}, 0, false, absl::StrFormat("%s conversion", DTypeName(dtype)));
    // +1, -0, +inf, -inf, quiet NaN, signalling NaN with payload, max finite, smallest subnormal.
    const std::vector<uint16_t> specials =
        dtype == DType::kBF16
            ? std::vector<uint16_t>{0x3f80, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xff81, 0x7f7f, 0x0001}
            : std::vector<uint16_t>{0x3c00, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfc01, 0x7bff, 0x0001};
    for (uint16_t special : specials) {
      std::vector<uint8_t> second(65536 * 2);
      for (uint32_t h = 0; h < 65536; ++h) {
        second[2 * h] = static_cast<uint8_t>(special);
        second[2 * h + 1] = static_cast<uint8_t>(special >> 8);
      }
      checker.Check(dtype, {all, second}, 0, false,
                    absl::StrFormat("%s all patterns + 0x%04x", DTypeName(dtype), special));
      checker.Check(dtype, {second, all}, 1, false,
                    absl::StrFormat("%s 0x%04x + all patterns", DTypeName(dtype), special));
    }
  }
}

TEST(ReduceKernelTest, OverflowRoundsToInfinityAndSubnormalsSurvive) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 1, 1);
  ReduceChecker checker(device.get());
  auto halves = [](std::vector<uint16_t> v) {
    std::vector<uint8_t> b(v.size() * 2);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  // bf16: max + max overflows; max + tiny stays; subnormal + subnormal; -0 + -0 is -0.
  checker.Check(DType::kBF16,
                {halves({0x7f7f, 0x7f7f, 0x0001, 0x8000, 0xff7f, 0x7f80}),
                 halves({0x7f7f, 0x0001, 0x0001, 0x8000, 0xff7f, 0xff80})},
                0, false, "bf16 edges");
  checker.Check(DType::kFP16,
                {halves({0x7bff, 0x7bff, 0x0001, 0x8000, 0xfbff, 0x7c00}),
                 halves({0x7bff, 0x0001, 0x0001, 0x8000, 0xfbff, 0xfc00})},
                0, false, "fp16 edges");
}

}  // namespace
}  // namespace dmalab

// DmaAllReduce on the simulator: exact results, rank consistency, in-place, the checkers and
// the fault injections they must catch, determinism and argument validation.
#include <cmath>
#include <cstring>
#include <random>

#include "absl/strings/str_format.h"
#include "common/core/dtype.h"
#include "common/core/result_checks.h"
#include "common/ring/dma_all_reduce.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim_device.h"

namespace dmalab {
namespace {

using ::testing::HasSubstr;

// Per-rank host values (as floats already representable in the dtype) and their tensors.
struct Inputs {
  std::vector<std::vector<float>> values;
  std::vector<TensorView> tensors;
};

std::vector<uint8_t> Encode(DType t, const std::vector<float>& v) {
  std::vector<uint8_t> bytes(v.size() * DTypeBytes(t));
  for (size_t i = 0; i < v.size(); ++i) StoreFromFloat(t, bytes.data(), i, v[i]);
  return bytes;
}

std::vector<float> Decode(DType t, const std::vector<uint8_t>& bytes) {
  std::vector<float> v(bytes.size() / DTypeBytes(t));
  for (size_t i = 0; i < v.size(); ++i) v[i] = LoadAsFloat(t, bytes.data(), i);
  return v;
}

// Integer values in [-8, 8] (exact in every dtype, and so is any sum of 16 of them), or
// random values rounded to the dtype.
Inputs MakeInputs(Device& dev, DType t, int64_t n, bool integers, uint64_t seed) {
  Inputs in;
  std::mt19937_64 rng(seed);
  for (int r = 0; r < dev.world_size(); ++r) {
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) {
      if (integers) {
        v[i] = static_cast<float>(static_cast<int>(rng() % 17) - 8);
      } else {
        const float x = std::ldexp(static_cast<float>(rng() % 2000001) - 1000000.0f, -18);
        v[i] = LoadAsFloat(t, Encode(t, {x}).data(), 0);
      }
    }
    absl::StatusOr<MemRef> mem = dev.Allocate(r, n * DTypeBytes(t), "input");
    EXPECT_TRUE(mem.ok()) << mem.status();
    EXPECT_TRUE(dev.Write(*mem, Encode(t, v)).ok());
    in.tensors.push_back(TensorView{*mem, t, {n}, true});
    in.values.push_back(std::move(v));
  }
  return in;
}

std::vector<float> ReadBack(Device& dev, const TensorView& t) {
  std::vector<uint8_t> bytes(t.bytes());
  EXPECT_TRUE(dev.Read(t.mem.Slice(0, bytes.size()), absl::MakeSpan(bytes)).ok());
  return Decode(t.dtype, bytes);
}

// The ring's arithmetic, computed independently: chunk c starts at rank c and each later rank
// adds its own value in fp64, rounded to fp32 and then to the dtype on every hop.
std::vector<float> Reference(const Inputs& in, DType t) {
  const int w = static_cast<int>(in.values.size());
  const int64_t n = static_cast<int64_t>(in.values[0].size());
  const int64_t chunk = n / w;
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(i / chunk);
    float acc = in.values[c][i];
    for (int j = 1; j < w; ++j) {
      const double exact = static_cast<double>(acc) + in.values[(c + j) % w][i];
      const float f32 = static_cast<float>(exact);
      acc = LoadAsFloat(t, Encode(t, {f32}).data(), 0);
    }
    out[i] = acc;
  }
  return out;
}

std::unique_ptr<DmaAllReduce> MakeAllReduce(Device& dev, uint64_t max_bytes, int pieces = 2,
                                            FaultSet faults = {}) {
  DmaAllReduceOptions o;
  o.max_bytes = max_bytes;
  o.pieces = pieces;
  o.faults = faults;
  absl::StatusOr<std::unique_ptr<DmaAllReduce>> ar = DmaAllReduce::Create(&dev, o);
  EXPECT_TRUE(ar.ok()) << ar.status();
  return *std::move(ar);
}

struct Case {
  int world;
  DType dtype;
  int pieces;
  int64_t elems;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << "W" << c.world << " " << DTypeName(c.dtype) << " P" << c.pieces << " N" << c.elems;
}

class RingExactTest : public ::testing::TestWithParam<Case> {};

TEST_P(RingExactTest, IntegerInputsSumExactlyOnEveryRank) {
  const Case c = GetParam();
  SimDevice dev(c.world, 7);
  auto ar = MakeAllReduce(dev, c.elems * DTypeBytes(c.dtype), c.pieces);
  Inputs in = MakeInputs(dev, c.dtype, c.elems, /*integers=*/true, 11);
  absl::StatusOr<std::vector<TensorView>> outs = ar->AllReduce(in.tensors);
  ASSERT_TRUE(outs.ok()) << outs.status();
  for (int r = 0; r < c.world; ++r) {
    const std::vector<float> got = ReadBack(dev, (*outs)[r]);
    int64_t wrong = 0;
    for (int64_t i = 0; i < c.elems; ++i) {
      int64_t sum = 0;
      for (int q = 0; q < c.world; ++q) sum += static_cast<int64_t>(in.values[q][i]);
      wrong += got[i] != static_cast<float>(sum);
    }
    EXPECT_EQ(wrong, 0) << "rank " << r;
  }
  EXPECT_TRUE(dev.findings().empty()) << dev.findings().ToString();
}

TEST_P(RingExactTest, RandomInputsMatchTheRoundedReferenceAndRanksAreBitIdentical) {
  const Case c = GetParam();
  SimDevice dev(c.world, 3);
  auto ar = MakeAllReduce(dev, c.elems * DTypeBytes(c.dtype), c.pieces);
  Inputs in = MakeInputs(dev, c.dtype, c.elems, /*integers=*/false, 5);
  absl::StatusOr<std::vector<TensorView>> outs = ar->AllReduce(in.tensors);
  ASSERT_TRUE(outs.ok()) << outs.status();
  const std::vector<float> expect = Reference(in, c.dtype);
  const std::vector<float> got = ReadBack(dev, (*outs)[0]);
  int64_t wrong = 0;
  for (int64_t i = 0; i < c.elems; ++i) wrong += FloatBits(got[i]) != FloatBits(expect[i]);
  EXPECT_EQ(wrong, 0);
  absl::StatusOr<std::vector<int>> differing = RanksDifferingFromRank0(dev, *outs);
  ASSERT_TRUE(differing.ok());
  EXPECT_TRUE(differing->empty());

  // In place gives the same bits as out of place.
  ASSERT_TRUE(ar->AllReduce(in.tensors, in.tensors).ok());
  for (int r = 0; r < c.world; ++r) {
    const std::vector<float> inplace = ReadBack(dev, in.tensors[r]);
    EXPECT_EQ(std::memcmp(inplace.data(), got.data(), got.size() * sizeof(float)), 0);
  }
  EXPECT_TRUE(dev.findings().empty()) << dev.findings().ToString();
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (int w : {2, 3, 4, 5, 8}) {
    const int64_t unit = w * 8;
    for (DType t : {DType::kBF16, DType::kFP16, DType::kFP32}) {
      for (int p : {1, 2, 4}) {
        // The smallest tensor, and one whose pieces fall back to one (under 512 KiB).
        cases.push_back({w, t, p, unit});
        cases.push_back({w, t, p, unit * 1001});
      }
      // About 4M elements: with bf16 at up to 8 ranks, pieces of at least 512 KiB.
      if (t == DType::kBF16 || w == 4) cases.push_back({w, t, 2, (int64_t{4} << 20) / unit * unit});
    }
  }
  cases.push_back({2, DType::kBF16, 4, int64_t{2} << 20});  // four real pieces of 512 KiB
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllGeometries, RingExactTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return absl::StrFormat("W%d_%s_P%d_N%d", info.param.world,
                                                  DTypeName(info.param.dtype), info.param.pieces,
                                                  info.param.elems);
                         });

// Two default-form calls back to back, then a free of the first result, as a model would.
std::string RunTwoCalls(SimDevice& dev, FaultSet faults, std::vector<TensorView>* live = nullptr) {
  const int64_t n = 4 * 8 * 4096;
  auto ar = MakeAllReduce(dev, n * 2, 2, faults);
  Inputs a = MakeInputs(dev, DType::kBF16, n, true, 1);
  Inputs b = MakeInputs(dev, DType::kBF16, n, true, 2);
  absl::StatusOr<std::vector<TensorView>> first = ar->AllReduce(a.tensors);
  EXPECT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::vector<TensorView>> second = ar->AllReduce(b.tensors);
  EXPECT_TRUE(second.ok()) << second.status();
  (void)dev.Synchronize();
  if (live != nullptr) {
    live->push_back((*first)[0]);
    live->push_back((*second)[0]);
  }
  return dev.findings().ToString();
}

TEST(SimCheckersTest, NoFindingsWithoutFaultsAcross200Seeds) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    SimDevice dev(4, seed);
    const std::string report = RunTwoCalls(dev, {});
    ASSERT_EQ(report, "") << "seed " << seed;
  }
}

TEST(SimCheckersTest, DropCopyWaitIsARaceBetweenTheCopyAndTheAdd) {
  int detected = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    SimDevice dev(4, seed);
    const std::string report = RunTwoCalls(dev, FaultSet().Add(Fault::kDropCopyWait));
    if (dev.findings().Count(FindingKind::kRace) == 0) continue;
    ++detected;
    const std::string& first = dev.findings().findings()[0].message;
    EXPECT_THAT(first, HasSubstr("rs.k"));
    EXPECT_THAT(first, HasSubstr(" copy'"));
    EXPECT_THAT(first, HasSubstr(" reduce'"));
    EXPECT_THAT(first, HasSubstr("allocation #"));
  }
  EXPECT_GE(detected, 1);
}

// With one scratch area per step, the ring's own dependency chain already orders every write
// of call n+1 after the successor's reads of call n: the all-gather of call n reaches every rank
// only after the successor's last reduce-scatter read, and call n+1's all-gather writes depend
// on the successor having entered call n+1. The handshake is defence in depth, not load
// bearing, and the race checker (which would name both calls) proves it on every seed.
TEST(SimCheckersTest, SkipEndHandshakeIsCoveredByTheRingsOwnOrderingWithPerStepScratch) {
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    SimDevice dev(4, seed);
    ASSERT_EQ(RunTwoCalls(dev, FaultSet().Add(Fault::kSkipEndHandshake)), "") << "seed " << seed;
  }
}

TEST(SimCheckersTest, PersistentOutputMakesLiveResultsAlias) {
  SimDevice dev(4, 1);
  std::vector<TensorView> live;
  RunTwoCalls(dev, FaultSet().Add(Fault::kPersistentOutput), &live);
  const std::vector<ResultAlias> aliases =
      FindResultAliases({{"first", live[0]}, {"second", live[1]}});
  ASSERT_EQ(aliases.size(), 1u);
  EXPECT_EQ(aliases[0].rank, 0);
  EXPECT_EQ(aliases[0].lo, live[0].addr());
  EXPECT_EQ(aliases[0].hi - aliases[0].lo, 4u * 8 * 4096 * 2);

  SimDevice clean(4, 1);
  live.clear();
  RunTwoCalls(clean, {}, &live);
  EXPECT_TRUE(FindResultAliases({{"first", live[0]}, {"second", live[1]}}).empty());
}

TEST(SimCheckersTest, SameSeedGivesByteIdenticalReportsAndOutputs) {
  auto run = [](uint64_t seed) {
    SimDevice dev(4, seed);
    std::string report = RunTwoCalls(dev, FaultSet().Add(Fault::kDropCopyWait));
    return std::make_pair(report, dev.ops_executed());
  };
  const auto a = run(42), b = run(42);
  EXPECT_EQ(a.first, b.first);
  EXPECT_FALSE(a.first.empty());
  EXPECT_EQ(a.second, b.second);
}

TEST(SimCheckersTest, UseAfterFreeAndUseAfterReuseNameTheAllocation) {
  SimDevice dev(2, 1);
  MemRef a = *dev.Allocate(0, 1024, "activation");
  MemRef dst = *dev.Allocate(0, 1024, "dst");
  ASSERT_TRUE(dev.Free(a).ok());
  ASSERT_TRUE(dev.Copy(dev.ComputeStream(0), dst, a, "stale copy").ok());
  ASSERT_TRUE(dev.Synchronize().ok());
  ASSERT_EQ(dev.findings().Count(FindingKind::kUseAfterFree), 1) << dev.findings().ToString();
  EXPECT_THAT(dev.findings().findings()[0].message,
              HasSubstr("op 'stale copy' uses allocation #1 'activation' after it was freed"));

  // The caching allocator hands the same block to the next request of that size.
  MemRef b = *dev.Allocate(0, 1024, "reused");
  EXPECT_EQ(b.addr, a.addr);
  EXPECT_NE(b.alloc_id, a.alloc_id);
  dev.ClearFindings();
  ASSERT_TRUE(dev.Copy(dev.ComputeStream(0), dst, a, "stale copy 2").ok());
  ASSERT_TRUE(dev.Synchronize().ok());
  ASSERT_EQ(dev.findings().Count(FindingKind::kUseAfterReuse), 1);
  EXPECT_THAT(dev.findings().findings()[0].message,
              HasSubstr("now belong to allocation #5 'reused'"));
}

// Reading in pieces hands over the bytes Read would, a piece of every range at a time in offset
// order, and the checkers see one host read of each whole range: a freed range is one use after
// free naming all of its bytes, however many pieces it is copied in. A range that fails as its
// Read would comes after the ranges before it are handed over whole.
TEST(SimCheckersTest, ReadPiecesIsOneCheckedReadOfEachRangeCopiedInPieces) {
  SimDevice dev(2, 1);
  constexpr uint64_t kBytes = 10000;  // pieces of 4096, 4096 and 1808 bytes
  const std::vector<MemRef> srcs = {*dev.Allocate(0, kBytes, "a"), *dev.Allocate(1, kBytes, "b")};
  std::vector<std::vector<uint8_t>> written(2, std::vector<uint8_t>(kBytes));
  for (int r = 0; r < 2; ++r) {
    for (uint64_t i = 0; i < kBytes; ++i) written[r][i] = static_cast<uint8_t>(i * 7 + r * 3);
    ASSERT_TRUE(dev.Write(srcs[r], written[r]).ok());
  }
  ASSERT_TRUE(dev.Free(srcs[1]).ok());
  std::vector<uint64_t> offsets;
  std::vector<std::vector<uint8_t>> got(2);
  const auto gather = [&](uint64_t offset, absl::Span<const absl::Span<const uint8_t>> pieces) {
    offsets.push_back(offset);
    for (size_t i = 0; i < pieces.size(); ++i) {
      got[i].insert(got[i].end(), pieces[i].begin(), pieces[i].end());
    }
    return absl::OkStatus();
  };
  ASSERT_TRUE(dev.ReadPieces(srcs, 4096, gather).ok());
  EXPECT_EQ(offsets, (std::vector<uint64_t>{0, 4096, 8192}));
  EXPECT_EQ(got, written);  // the freed block is not reused: its bytes remain
  ASSERT_EQ(dev.findings().Count(FindingKind::kUseAfterFree), 1) << dev.findings().ToString();
  EXPECT_EQ(dev.findings().findings()[0].mem.addr, srcs[1].addr);
  EXPECT_EQ(dev.findings().findings()[0].mem.bytes, kBytes);

  // A range outside the device's memory: the one before it is handed over whole, then the error
  // its Read gives.
  MemRef outside = srcs[1];
  outside.addr += uint64_t{1} << 36;
  outside.alloc_id = 0;
  std::vector<uint8_t> buffer(kBytes);
  const absl::Status read_error = dev.Read(outside, absl::MakeSpan(buffer));
  ASSERT_FALSE(read_error.ok());
  offsets.clear();
  got.assign(2, {});
  const std::vector<MemRef> with_outside = {srcs[0], outside};
  EXPECT_EQ(dev.ReadPieces(with_outside, 4096, gather), read_error);
  EXPECT_EQ(offsets, (std::vector<uint64_t>{0, 4096, 8192}));
  EXPECT_EQ(got[0], written[0]);
  EXPECT_TRUE(got[1].empty());
}

// Issue 15, item 4: the records of freed allocations are bounded (the last 65,536 frees per
// rank), so a long run's memory stays flat; a use of an allocation freed before that is still a
// use after free, named by id.
TEST(SimCheckersTest, AUseOfAnAllocationFreedLongAgoIsStillReported) {
  SimDevice dev(2, 1);
  MemRef a = *dev.Allocate(0, 1024, "activation");
  MemRef dst = *dev.Allocate(0, 1024, "dst");
  ASSERT_TRUE(dev.Free(a).ok());
  for (size_t i = 0; i < SimMemory::kFreedRecordsKept; ++i) {
    ASSERT_TRUE(dev.Free(*dev.Allocate(0, 4096, "churn")).ok());
  }
  ASSERT_TRUE(dev.Synchronize().ok());
  ASSERT_TRUE(dev.Copy(dev.ComputeStream(0), dst, a, "stale copy").ok());
  ASSERT_TRUE(dev.Synchronize().ok());
  ASSERT_EQ(dev.findings().Count(FindingKind::kUseAfterFree), 1) << dev.findings().ToString();
  EXPECT_THAT(dev.findings().findings()[0].message,
              HasSubstr("op 'stale copy' uses allocation #1 after it was freed (more than 65536 "
                        "frees ago: its tag and freeing step are no longer kept)"));
}

TEST(SimCheckersTest, AWaitThatCanNeverBeSatisfiedIsADeadlockNotAHang) {
  SimDevice dev(2, 1);
  MemRef words = *dev.Allocate(1, 16, "flags");
  ASSERT_TRUE(dev.Write(words, std::vector<uint8_t>(16, 0)).ok());
  ASSERT_TRUE(
      dev.WaitFlag(dev.ComputeStream(1), words.Slice(0, 8), words.Slice(8, 8), "lonely wait").ok());
  const absl::Status s = dev.Synchronize();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("rank 1 stream 'compute' op 'lonely wait' waits for flag at rank 1"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("= 0 to reach 1"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("(seed 1)"));
  EXPECT_EQ(dev.findings().Count(FindingKind::kDeadlock), 1);
}

class ValidationTest : public ::testing::Test {
 protected:
  ValidationTest() : dev_(4, 1), ar_(MakeAllReduce(dev_, 4096)) {
    in_ = MakeInputs(dev_, DType::kBF16, 1024, true, 1);
  }
  std::string Error(absl::Span<const TensorView> ins, absl::Span<const TensorView> outs) {
    return std::string(ar_->AllReduce(ins, outs).message());
  }
  TensorView Tensor(int rank, int64_t n, DType t = DType::kBF16) {
    return TensorView{*dev_.Allocate(rank, n * DTypeBytes(t), "t"), t, {n}, true};
  }
  SimDevice dev_;
  std::unique_ptr<DmaAllReduce> ar_;
  Inputs in_;
};

TEST_F(ValidationTest, EveryRuleHasItsMessage) {
  std::vector<TensorView> ins = in_.tensors;
  EXPECT_EQ(ar_->AllReduce(absl::MakeSpan(ins).subspan(0, 3)).status().message(),
            "all_reduce: inputs has 3 tensors; need one per rank (world = 4)");
  std::swap(ins[1], ins[2]);
  EXPECT_EQ(ar_->AllReduce(ins).status().message(),
            "all_reduce: inputs[1] is on rank 2; must be on rank 1");
  ins = in_.tensors;
  ins[2].contiguous = false;
  EXPECT_EQ(ar_->AllReduce(ins).status().message(),
            "all_reduce: inputs[2] is not contiguous; must be contiguous");
  ins = in_.tensors;
  ins[3].dtype = DType::kFP16;
  EXPECT_EQ(ar_->AllReduce(ins).status().message(),
            "all_reduce: inputs[3] has dtype fp16, inputs[0] has bf16; must match");
  ins = in_.tensors;
  ins[1].shape = {512, 2};
  EXPECT_EQ(ar_->AllReduce(ins).status().message(),
            "all_reduce: inputs[1] has shape [512, 2], inputs[0] has [1024]; must match");
  ins = in_.tensors;
  for (TensorView& t : ins) t.shape = {1000};
  EXPECT_EQ(ar_->AllReduce(ins).status().message(),
            "all_reduce: input has 1000 elements; must be a positive multiple of world*8 = 32");
  std::vector<TensorView> big;
  for (int r = 0; r < 4; ++r) big.push_back(Tensor(r, 4096));
  EXPECT_EQ(ar_->AllReduce(big).status().message(),
            "all_reduce: input is 8192 bytes; must be in [min_bytes, max_bytes] = [1, 4096]");

  std::vector<TensorView> outs;
  for (int r = 0; r < 4; ++r) outs.push_back(Tensor(r, 1024));
  std::vector<TensorView> o = outs;
  o[0] = Tensor(0, 2048);
  EXPECT_EQ(Error(in_.tensors, o),
            "all_reduce: outs[0] has 2048 elements, input has 1024; must match");
  o = outs;
  o[1] = Tensor(1, 1024, DType::kFP32);
  EXPECT_EQ(Error(in_.tensors, o),
            "all_reduce: outs[1] has dtype fp32, input has bf16; must match");
  o = outs;
  o[2].shape = {32, 32};
  EXPECT_EQ(Error(in_.tensors, o),
            "all_reduce: outs[2] has shape [32, 32], input has [1024]; must match");
  o = outs;
  o[3] = Tensor(2, 1024);
  EXPECT_EQ(Error(in_.tensors, o), "all_reduce: outs[3] is on rank 2; must be on rank 3");
  o = in_.tensors;
  o[0].mem = o[0].mem.Slice(2, 2046);
  o[0].shape = {1023};
  EXPECT_EQ(Error(in_.tensors, o),
            "all_reduce: outs[0] has 1023 elements, input has 1024; must match");
  o = in_.tensors;
  const uint64_t base = in_.tensors[0].addr();
  o[0].mem = MemRef{0, base + 64, 2048, 0};
  EXPECT_EQ(Error(in_.tensors, o),
            absl::StrFormat("all_reduce: outs[0] [0x%x, 0x%x) overlaps inputs[0] [0x%x, 0x%x) "
                            "without being equal; must be disjoint or identical (in place)",
                            base + 64, base + 2112, base, base + 2048));
}

TEST(DmaAllReduceOptionsTest, BadOptionsAreRejected) {
  SimDevice dev(4, 1);
  DmaAllReduceOptions o;
  o.pieces = 0;
  EXPECT_EQ(DmaAllReduce::Create(&dev, o).status().message(),
            "DmaAllReduce: pieces is 0; must be in [1, 8]");
  o = {};
  o.max_bytes = 0;
  EXPECT_EQ(DmaAllReduce::Create(&dev, o).status().message(),
            "DmaAllReduce: max_bytes is 0; must be > 0");
  o = {};
  o.min_bytes = 1 << 30;
  o.max_bytes = 1 << 20;
  EXPECT_EQ(DmaAllReduce::Create(&dev, o).status().message(),
            "DmaAllReduce: min_bytes is 1073741824; must be at most max_bytes = 1048576");
  SimDevice one(1, 1);
  EXPECT_EQ(DmaAllReduce::Create(&one, {}).status().message(),
            "DmaAllReduce: world is 1; must be in [2, 16]");
}

}  // namespace
}  // namespace dmalab

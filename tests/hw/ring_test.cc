// DmaAllReduce on CudaDevice with W virtual ranks on one GPU: results equal the ring's exact
// host fold and are bit-identical across ranks; in place; default outputs stay disjoint and
// retained; graph replay with new inputs.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/core/dtype.h"
#include "common/ring/dma_all_reduce.h"
#include "gtest/gtest.h"
#include "hw/cuda_device.h"
#include "tests/hw/gpu_test_support.h"

namespace dmalab {
namespace {

using ::dmalab::testing::ReadVector;
using ::dmalab::testing::WriteVector;

using Bytes = std::vector<uint8_t>;

Bytes RandomTensor(std::mt19937_64& rng, DType dtype, int64_t elems) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Bytes v(static_cast<size_t>(elems) * DTypeBytes(dtype));
  for (int64_t i = 0; i < elems; ++i) StoreFromFloat(dtype, v.data(), i, normal(rng));
  return v;
}

// The ring's arithmetic (docs/design.md section 3): chunk c is summed along the ring starting at
// rank c (c, c+1, ..., c+W-1 mod W), rounded to the dtype after every hop. fp32 adds of two
// non-NaN values commute exactly, so the order of the two terms within a hop does not matter.
Bytes RingExpected(DType dtype, const std::vector<Bytes>& inputs, int64_t elems) {
  const int world = static_cast<int>(inputs.size());
  const int64_t chunk = elems / world;
  Bytes out(inputs[0].size());
  for (int64_t i = 0; i < elems; ++i) {
    const int c = static_cast<int>(i / chunk);
    float acc = LoadAsFloat(dtype, inputs[c].data(), i);
    for (int k = 1; k < world; ++k) {
      const float sum = acc + LoadAsFloat(dtype, inputs[(c + k) % world].data(), i);
      StoreFromFloat(dtype, out.data(), i, sum);
      acc = LoadAsFloat(dtype, out.data(), i);
    }
  }
  return out;
}

struct Ring {
  std::unique_ptr<CudaDevice> device;
  std::unique_ptr<DmaAllReduce> ar;
  std::vector<TensorView> inputs, outs;
};

class RingTest : public ::testing::TestWithParam<int> {
 protected:
  // Elements per tensor: W * 8 * k; the large size makes pieces of at least 512 KiB.
  static int64_t Elems(int world, bool large) { return world * 8 * (large ? 49'152 : 160); }

  void CheckOuts(CudaDevice& device, const std::vector<TensorView>& outs, const Bytes& want,
                 const std::string& what) {
    for (size_t r = 0; r < outs.size(); ++r) {
      absl::StatusOr<Bytes> got = ReadVector<uint8_t>(device, outs[r].mem);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ(got->size(), want.size());
      int64_t mismatches = 0;
      for (size_t i = 0; i < want.size(); ++i) mismatches += (*got)[i] != want[i];
      EXPECT_EQ(mismatches, 0) << what << ": rank " << r << " differs in " << mismatches
                               << " bytes from the ring's host fold";
    }
  }
};

TEST_P(RingTest, OutputsEqualTheHostFoldOnEveryRank) {
  const int world = GetParam();
  DMALAB_CUDA_DEVICE_OR_SKIP(device, world, 1);
  std::mt19937_64 rng(world);
  for (DType dtype : {DType::kBF16, DType::kFP32}) {
    for (bool large : {false, true}) {
      const int64_t elems = Elems(world, large);
      const uint64_t bytes = static_cast<uint64_t>(elems) * DTypeBytes(dtype);
      DmaAllReduceOptions options;
      options.max_bytes = bytes;
      absl::StatusOr<std::unique_ptr<DmaAllReduce>> ar =
          DmaAllReduce::Create(device.get(), options);
      ASSERT_TRUE(ar.ok()) << ar.status();
      std::vector<Bytes> host_inputs;
      std::vector<TensorView> inputs, outs;
      for (int r = 0; r < world; ++r) {
        host_inputs.push_back(RandomTensor(rng, dtype, elems));
        MemRef in = *device->Allocate(r, bytes, "input");
        MemRef out = *device->Allocate(r, bytes, "output");
        ASSERT_TRUE(WriteVector(*device, in, host_inputs.back()).ok());
        inputs.push_back(TensorView{in, dtype, {elems}, true});
        outs.push_back(TensorView{out, dtype, {elems}, true});
      }
      const Bytes want = RingExpected(dtype, host_inputs, elems);
      const std::string what = absl::StrFormat("W=%d %s %d elems", world, DTypeName(dtype), elems);
      // Twice: the second call runs on the monotonic flag counters left by the first.
      for (int call = 0; call < 2; ++call) {
        ASSERT_TRUE((*ar)->AllReduce(inputs, outs).ok()) << what;
        const absl::Status s = device->Synchronize();
        ASSERT_TRUE(s.ok()) << what << ": " << s;
        CheckOuts(*device, outs, want, what);
      }
      // In place: outs == inputs.
      ASSERT_TRUE((*ar)->AllReduce(inputs, inputs).ok()) << what;
      ASSERT_TRUE(device->Synchronize().ok()) << what;
      CheckOuts(*device, inputs, want, what + " in place");
      for (int r = 0; r < world; ++r) {
        ASSERT_TRUE(device->Free(inputs[r].mem).ok());
        ASSERT_TRUE(device->Free(outs[r].mem).ok());
      }
    }
  }
}

TEST_P(RingTest, DefaultOutputsAreDisjointAndSurviveLaterCalls) {
  const int world = GetParam();
  DMALAB_CUDA_DEVICE_OR_SKIP(device, world, 1);
  const int64_t elems = Elems(world, false);
  const uint64_t bytes = elems * 2;
  DmaAllReduceOptions options;
  options.max_bytes = bytes;
  std::unique_ptr<DmaAllReduce> ar = *DmaAllReduce::Create(device.get(), options);
  std::mt19937_64 rng(100 + world);
  std::vector<std::vector<TensorView>> results;
  std::vector<Bytes> wants;
  for (int call = 0; call < 3; ++call) {
    std::vector<Bytes> host_inputs;
    std::vector<TensorView> inputs;
    for (int r = 0; r < world; ++r) {
      host_inputs.push_back(RandomTensor(rng, DType::kBF16, elems));
      MemRef in = *device->Allocate(r, bytes, "input");
      ASSERT_TRUE(WriteVector(*device, in, host_inputs.back()).ok());
      inputs.push_back(TensorView{in, DType::kBF16, {elems}, true});
    }
    absl::StatusOr<std::vector<TensorView>> outs = ar->AllReduce(inputs);
    ASSERT_TRUE(outs.ok()) << outs.status();
    ASSERT_TRUE(device->Synchronize().ok());
    for (int r = 0; r < world; ++r) ASSERT_TRUE(device->Free(inputs[r].mem).ok());
    results.push_back(*outs);
    wants.push_back(RingExpected(DType::kBF16, host_inputs, elems));
  }
  for (size_t a = 0; a < results.size(); ++a) {
    for (size_t b = a + 1; b < results.size(); ++b) {
      for (int r = 0; r < world; ++r) {
        EXPECT_FALSE(results[a][r].mem.Overlaps(results[b][r].mem))
            << "calls " << a << " and " << b << " rank " << r;
      }
    }
    CheckOuts(*device, results[a], wants[a], absl::StrFormat("retained result of call %d", a));
  }
}

TEST_P(RingTest, GraphReplayReducesNewInputs) {
  const int world = GetParam();
  DMALAB_CUDA_DEVICE_OR_SKIP(device, world, 1);
  const int64_t elems = Elems(world, true);
  const uint64_t bytes = elems * 2;
  DmaAllReduceOptions options;
  options.max_bytes = bytes;
  std::unique_ptr<DmaAllReduce> ar = *DmaAllReduce::Create(device.get(), options);
  std::vector<TensorView> inputs, outs;
  for (int r = 0; r < world; ++r) {
    MemRef in = *device->Allocate(r, bytes, "input");
    MemRef out = *device->Allocate(r, bytes, "output");
    ASSERT_TRUE(WriteVector(*device, in, Bytes(bytes, 0)).ok());
    inputs.push_back(TensorView{in, DType::kBF16, {elems}, true});
    outs.push_back(TensorView{out, DType::kBF16, {elems}, true});
  }
  // An eager call first: it creates the plan's events outside the capture, and shows that eager
  // calls and replays share the monotonic flag counters.
  ASSERT_TRUE(ar->AllReduce(inputs, outs).ok());
  ASSERT_TRUE(device->Synchronize().ok());
  absl::StatusOr<CudaGraph> graph = device->Capture([&]() { return ar->AllReduce(inputs, outs); });
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::mt19937_64 rng(7 * world);
  for (int replay = 0; replay < 3; ++replay) {
    std::vector<Bytes> host_inputs;
    for (int r = 0; r < world; ++r) {
      host_inputs.push_back(RandomTensor(rng, DType::kBF16, elems));
      ASSERT_TRUE(WriteVector(*device, inputs[r].mem, host_inputs.back()).ok());
    }
    ASSERT_TRUE(device->Replay(*graph).ok());
    const absl::Status s = device->Synchronize();
    ASSERT_TRUE(s.ok()) << s;
    CheckOuts(*device, outs, RingExpected(DType::kBF16, host_inputs, elems),
              absl::StrFormat("W=%d replay %d", world, replay));
  }
  // Eager again after replays: the counters stayed consistent.
  ASSERT_TRUE(ar->AllReduce(inputs, outs).ok());
  EXPECT_TRUE(device->Synchronize().ok());
}

INSTANTIATE_TEST_SUITE_P(VirtualRanks, RingTest, ::testing::Values(2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrFormat("W%d", info.param);
                         });

}  // namespace
}  // namespace dmalab

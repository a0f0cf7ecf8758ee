// DmaAllReduce's graph cache on the GPU: replays of a captured call reduce new input contents
// exactly as eager calls do. Skips without a GPU.
#include <cstring>
#include <random>

#include "common/core/dtype.h"
#include "common/ring/dma_all_reduce.h"
#include "gtest/gtest.h"
#include "hw/cuda_device.h"
#include "tests/hw/gpu_test_support.h"

namespace dmalab {
namespace {

TEST(GraphCacheTest, ReplaysMatchEagerCallsBitForBitAcrossNewInputs) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 4, 1);
  const int64_t n = 4 * 8 * 1024;
  DmaAllReduceOptions o;
  o.max_bytes = n * 2;
  DmaAllReduceOptions cached = o;
  cached.graph_cache = true;
  auto eager = *DmaAllReduce::Create(device.get(), o);
  auto graphed = *DmaAllReduce::Create(device.get(), cached);
  std::vector<TensorView> in, out_eager, out_graph;
  for (int r = 0; r < 4; ++r) {
    in.push_back(TensorView{*device->Allocate(r, n * 2, "in"), DType::kBF16, {n}, true});
    out_eager.push_back(TensorView{*device->Allocate(r, n * 2, "oe"), DType::kBF16, {n}, true});
    out_graph.push_back(TensorView{*device->Allocate(r, n * 2, "og"), DType::kBF16, {n}, true});
  }
  std::mt19937 rng(3);
  for (int call = 0; call < 5; ++call) {
    for (int r = 0; r < 4; ++r) {
      std::vector<uint8_t> bytes(n * 2);
      for (int64_t i = 0; i < n; ++i) {
        StoreFromFloat(DType::kBF16, bytes.data(), i, static_cast<float>(rng() % 1000) / 64.0f);
      }
      ASSERT_TRUE(device->Write(in[r].mem, bytes).ok());
    }
    ASSERT_TRUE(eager->AllReduce(in, out_eager).ok());
    ASSERT_TRUE(graphed->AllReduce(in, out_graph).ok());
    ASSERT_TRUE(device->Synchronize().ok());
    for (int r = 0; r < 4; ++r) {
      std::vector<uint8_t> a(n * 2), b(n * 2);
      ASSERT_TRUE(device->Read(out_eager[r].mem, absl::MakeSpan(a)).ok());
      ASSERT_TRUE(device->Read(out_graph[r].mem, absl::MakeSpan(b)).ok());
      EXPECT_EQ(a, b) << "call " << call << " rank " << r;
    }
  }
  EXPECT_EQ(graphed->calls(), 5);
}

}  // namespace
}  // namespace dmalab

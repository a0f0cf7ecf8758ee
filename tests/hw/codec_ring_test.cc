// The compressed wire modes of DmaAllReduce on CudaDevice (W virtual ranks on one GPU) against
// the same all-reduce on SimDevice: every rank's output is bit-identical to the simulator's, on
// realistic values and on edge blocks (NaN, inf, subnormals, -0, all-zero blocks, huge values),
// out of place, in place, and replayed from the graph cache. The simulator runs the host reference
// arithmetic (ReduceHost), so this is the claim that the GPU reproduces the simulated run exactly.
// Skips without a GPU.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/ring/dma_all_reduce.h"
#include "dmalab/wire.h"
#include "gtest/gtest.h"
#include "hw/cuda_device.h"
#include "sim/sim_device.h"
#include "tests/hw/codec_operands.h"
#include "tests/hw/gpu_test_support.h"

namespace dmalab {
namespace {

using ::dmalab::testing::Bytes;
using ::dmalab::testing::InputKind;
using ::dmalab::testing::InputKindName;
using ::dmalab::testing::RandomBF16;
using ::dmalab::testing::ReadVector;
using ::dmalab::testing::WriteVector;

// Runs one all-reduce of bf16 `inputs` (one per rank) on `device` with `wire` and returns every
// rank's output; in place when `in_place`. With `graph_cache` (out of place only) the call is
// made twice, the outputs overwritten in between: the result is the graph replay's.
absl::StatusOr<std::vector<Bytes>> RunAllReduce(Device& device, WireMode wire,
                                                const std::vector<Bytes>& inputs, bool in_place,
                                                bool graph_cache = false) {
  const int world = static_cast<int>(inputs.size());
  const uint64_t bytes = inputs[0].size();
  const int64_t elems = static_cast<int64_t>(bytes / 2);
  DmaAllReduceOptions options;
  options.max_bytes = bytes;
  options.wire = wire;
  options.graph_cache = graph_cache;
  absl::StatusOr<std::unique_ptr<DmaAllReduce>> ar = DmaAllReduce::Create(&device, options);
  if (!ar.ok()) return ar.status();
  std::vector<TensorView> ins, outs;
  for (int r = 0; r < world; ++r) {
    absl::StatusOr<MemRef> in = device.Allocate(r, bytes, "input");
    if (!in.ok()) return in.status();
    if (absl::Status s = WriteVector(device, *in, inputs[r]); !s.ok()) return s;
    ins.push_back(TensorView{*in, DType::kBF16, {elems}, true});
    if (in_place) continue;
    absl::StatusOr<MemRef> out = device.Allocate(r, bytes, "output");
    if (!out.ok()) return out.status();
    outs.push_back(TensorView{*out, DType::kBF16, {elems}, true});
  }
  if (in_place) outs = ins;
  for (int call = 0; call < (graph_cache ? 2 : 1); ++call) {
    if (call > 0) {
      for (const TensorView& out : outs) {
        if (absl::Status s = WriteVector(device, out.mem, Bytes(bytes, 0xcd)); !s.ok()) return s;
      }
    }
    if (absl::Status s = (*ar)->AllReduce(ins, outs); !s.ok()) return s;
    if (absl::Status s = device.Synchronize(); !s.ok()) return s;
  }
  std::vector<Bytes> results;
  for (int r = 0; r < world; ++r) {
    absl::StatusOr<Bytes> got = ReadVector<uint8_t>(device, outs[r].mem);
    if (!got.ok()) return got.status();
    results.push_back(*std::move(got));
  }
  for (int r = 0; r < world; ++r) {
    if (absl::Status s = device.Free(ins[r].mem); !s.ok()) return s;
    if (!in_place) {
      if (absl::Status s = device.Free(outs[r].mem); !s.ok()) return s;
    }
  }
  return results;
}

void ExpectEqualToSimulator(const std::vector<Bytes>& want, const std::vector<Bytes>& got,
                            const std::string& what) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t r = 0; r < want.size(); ++r) {
    ASSERT_EQ(want[r].size(), got[r].size());
    int64_t mismatches = 0;
    int64_t first = -1;
    for (size_t i = 0; i < want[r].size(); ++i) {
      if (got[r][i] != want[r][i] && mismatches++ == 0) first = static_cast<int64_t>(i);
    }
    EXPECT_EQ(mismatches, 0) << what << ": rank " << r << " differs from the simulator in "
                             << mismatches << " bytes, first at byte " << first;
  }
}

struct CodecRingCase {
  int world;
  WireMode wire;
};

class CodecRingTest : public ::testing::TestWithParam<CodecRingCase> {};

TEST_P(CodecRingTest, EveryRankEqualsTheSimulatorBitForBit) {
  const CodecRingCase c = GetParam();
  DMALAB_CUDA_DEVICE_OR_SKIP(gpu, c.world, 1);
  std::mt19937_64 rng(1000 * c.world + static_cast<int>(c.wire));
  // A few blocks per shard, and 2048 blocks per shard (two real pieces).
  for (int64_t blocks_per_shard : {3, 2048}) {
    const int64_t elems = c.world * 128 * blocks_per_shard;
    for (InputKind kind : {InputKind::kValues, InputKind::kEdges}) {
      std::vector<Bytes> inputs;
      for (int r = 0; r < c.world; ++r) inputs.push_back(RandomBF16(rng, kind, elems));
      for (bool in_place : {false, true}) {
        // The large size once per input kind, to keep the simulator's share of the run short.
        if (blocks_per_shard > 3 && in_place != (kind == InputKind::kEdges)) continue;
        const std::string what =
            absl::StrFormat("W=%d %s, %d elems, %s%s", c.world, WireModeName(c.wire), elems,
                            InputKindName(kind), in_place ? ", in place" : "");
        SimDevice sim(c.world, /*seed=*/7);
        absl::StatusOr<std::vector<Bytes>> want = RunAllReduce(sim, c.wire, inputs, in_place);
        ASSERT_TRUE(want.ok()) << what << ": simulator: " << want.status();
        ASSERT_TRUE(sim.findings().empty()) << what << ": " << sim.findings().ToString();
        // Eager, and (out of place) replayed from the graph cache.
        for (bool graph_cache : {false, true}) {
          if (graph_cache && in_place) continue;
          const std::string how = what + (graph_cache ? ", graph replay" : ", eager");
          absl::StatusOr<std::vector<Bytes>> got =
              RunAllReduce(*gpu, c.wire, inputs, in_place, graph_cache);
          ASSERT_TRUE(got.ok()) << how << ": GPU: " << got.status();
          ExpectEqualToSimulator(*want, *got, how);
        }
      }
    }
  }
}

std::vector<CodecRingCase> Cases() {
  std::vector<CodecRingCase> cases;
  for (int world : {2, 3, 4, 8}) {
    for (WireMode wire : {WireMode::kNative, WireMode::kI8, WireMode::kI8Ring, WireMode::kI8A2A,
                          WireMode::kE4M3, WireMode::kE4M3Ring, WireMode::kE4M3A2A}) {
      cases.push_back({world, wire});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(VirtualRanks, CodecRingTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<CodecRingCase>& info) {
                           return absl::StrFormat("W%d_%s", info.param.world,
                                                  WireModeName(info.param.wire));
                         });

}  // namespace
}  // namespace dmalab

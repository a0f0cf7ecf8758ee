// The timing model: exact times of hand-computed cases, a ring all-reduce against the analytic
// ring time, independence from the scheduler's seed, the shipped topologies, and the topology
// loader's located errors.
#include "sim/timing_model.h"

#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/ring/dma_all_reduce.h"
#include "gtest/gtest.h"
#include "sim/predict.h"
#include "sim/sim_device.h"
#include "sim/topology.h"

namespace dmalab {
namespace {

// Round numbers: peer copies 50 GB/s (50e3 bytes/us) after 5 us, local copies 1000 GB/s after
// 2 us, kernels 3 us, flags 1.5 us, free host calls; GPUs 0-1 under switch sw0, 2-3 under sw1,
// each switch with a 50 GB/s uplink to the root complex.
constexpr char kSwitchPairs[] = R"(name: test_switch_pairs
gpus: 4
copy_engines: 2
memory_gbps: 1000000
links:
  local: {gbps: 1000, latency_us: 2}
  peer: {gbps: 50, latency_us: 5}
uplinks:
  - {name: sw0, parent: rc, gbps: 50}
  - {name: sw1, parent: rc, gbps: 50}
  - {name: rc}
gpu_uplinks: [sw0, sw0, sw1, sw1]
kernel: {launch_us: 0, overhead_us: 3, reduce_gbps: 500}
flag: {latency_us: 1.5}
host: {copy_us: 0, event_us: 0}
)";

Topology Parse(const std::string& text) {
  absl::StatusOr<Topology> t = ParseTopology(text, "t.yaml");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : Topology{};
}

// A device of `world` ranks timed on `topology`, with one 1 MB buffer and one flag word per
// rank.
class Timed {
 public:
  Timed(const Topology& topology, int world, uint64_t seed = 1) : dev_(world, seed) {
    EXPECT_TRUE(dev_.SetTopology(&topology).ok());
    for (int r = 0; r < world; ++r) {
      bufs_.push_back(*dev_.Allocate(r, kBytes, "buf"));
      words_.push_back(*dev_.Allocate(r, 24, "flag, counter, expected"));
      EXPECT_TRUE(dev_.Write(words_[r], std::vector<uint8_t>(24, 0)).ok());
    }
    last_us_ = dev_.now_us();
  }
  SimDevice& dev() { return dev_; }
  StreamId Stream(int rank, StreamKind kind = StreamKind::kCopy) {
    return *dev_.CreateStream(rank, kind, "s");
  }
  MemRef Buf(int rank, uint64_t offset = 0, uint64_t bytes = kBytes / 2) {
    return bufs_[rank].Slice(offset, bytes);
  }
  MemRef Flag(int rank) { return words_[rank].Slice(0, 8); }
  MemRef Counter(int rank) { return words_[rank].Slice(8, 8); }
  MemRef Expected(int rank) { return words_[rank].Slice(16, 8); }
  // Synchronizes and returns the time since the previous Run (or setup), enqueues included.
  double Run() {
    EXPECT_TRUE(dev_.Synchronize().ok());
    const double t = dev_.now_us() - last_us_;
    last_us_ = dev_.now_us();
    return t;
  }

  static constexpr uint64_t kBytes = 2'000'000;

 private:
  SimDevice dev_;
  std::vector<MemRef> bufs_, words_;
  double last_us_ = 0;
};

TEST(TimingModelTest, OneCopyTakesLatencyPlusBytesOverBandwidth) {
  const Topology topo = Parse(kSwitchPairs);
  Timed t(topo, 4);
  ASSERT_TRUE(t.dev().Copy(t.Stream(0), t.Buf(1), t.Buf(0), "c").ok());
  EXPECT_DOUBLE_EQ(t.Run(), 5 + 1e6 / 50e3);
}

TEST(TimingModelTest, TwoCopiesThroughOneUplinkDirectionTakeTwiceAsLong) {
  const Topology topo = Parse(kSwitchPairs);
  Timed t(topo, 4);
  // 0->2 and 1->3 both climb sw0's uplink and descend sw1's.
  ASSERT_TRUE(t.dev().Copy(t.Stream(0), t.Buf(2), t.Buf(0), "a").ok());
  ASSERT_TRUE(t.dev().Copy(t.Stream(1), t.Buf(3, Timed::kBytes / 2), t.Buf(1), "b").ok());
  EXPECT_DOUBLE_EQ(t.Run(), 5 + 2 * 1e6 / 50e3);
}

TEST(TimingModelTest, OppositeDirectionsOfAnUplinkDoNotShare) {
  const Topology topo = Parse(kSwitchPairs);
  Timed t(topo, 4);
  ASSERT_TRUE(t.dev().Copy(t.Stream(0), t.Buf(2), t.Buf(0), "a").ok());
  ASSERT_TRUE(t.dev().Copy(t.Stream(3), t.Buf(1), t.Buf(3), "b").ok());
  EXPECT_DOUBLE_EQ(t.Run(), 5 + 1e6 / 50e3);
}

TEST(TimingModelTest, CopiesWithinASwitchPairDoNotTouchTheUplink) {
  const Topology topo = Parse(kSwitchPairs);
  Timed t(topo, 4);
  ASSERT_TRUE(t.dev().Copy(t.Stream(0), t.Buf(2), t.Buf(0), "a").ok());
  ASSERT_TRUE(t.dev().Copy(t.Stream(1), t.Buf(0, Timed::kBytes / 2), t.Buf(1), "b").ok());
  EXPECT_DOUBLE_EQ(t.Run(), 5 + 1e6 / 50e3);
}

TEST(TimingModelTest, AThirdCopyWaitsForOneOfTwoCopyEngines) {
  const Topology topo = Parse(kSwitchPairs);
  Timed t(topo, 4);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(t.dev()
                    .Copy(t.Stream(0), t.Buf(0, 0, 250'000), t.Buf(0, 1'000'000, 250'000), "local")
                    .ok());
  }
  // Local copies: 2 us + 250e3 / 1000e3 us = 2.25 us; the third starts when one ends.
  EXPECT_DOUBLE_EQ(t.Run(), 2 * 2.25);
}

TEST(TimingModelTest, FlagChainAddsKernelAndFlagLatencyPerHop) {
  const Topology topo = Parse(kSwitchPairs);
  Timed t(topo, 4);
  // Rank 0 signals rank 1; rank 1 waits, then signals rank 2; rank 2 waits.
  ASSERT_TRUE(
      t.dev().SignalFlag(t.Stream(0, StreamKind::kFlag), t.Counter(0), t.Flag(1), "s0").ok());
  const StreamId s1 = t.Stream(1, StreamKind::kFlag);
  ASSERT_TRUE(t.dev().WaitFlag(s1, t.Expected(1), t.Flag(1), "w1").ok());
  ASSERT_TRUE(t.dev().SignalFlag(s1, t.Counter(1), t.Flag(2), "s1").ok());
  ASSERT_TRUE(
      t.dev().WaitFlag(t.Stream(2, StreamKind::kFlag), t.Expected(2), t.Flag(2), "w2").ok());
  // Signal kernel 3 us, seen 1.5 us later; the next signal kernel 3 us, seen 1.5 us later.
  EXPECT_DOUBLE_EQ(t.Run(), 3 + 1.5 + 3 + 1.5);
}

TEST(TimingModelTest, EventWaitDelaysTheWaitingStream) {
  const Topology topo = Parse(kSwitchPairs);
  Timed t(topo, 4);
  const StreamId a = t.Stream(0), b = t.Stream(0);
  const EventId ev = *t.dev().CreateEvent(0);
  ASSERT_TRUE(t.dev().Copy(a, t.Buf(1), t.Buf(0), "peer").ok());
  ASSERT_TRUE(t.dev().RecordEvent(ev, a).ok());
  ASSERT_TRUE(t.dev().WaitEvent(b, ev).ok());
  ASSERT_TRUE(t.dev().Copy(b, t.Buf(0, 0, 1'000'000), t.Buf(0, 1'000'000, 1'000'000), "l").ok());
  EXPECT_DOUBLE_EQ(t.Run(), (5 + 1e6 / 50e3) + (2 + 1e6 / 1000e3));
}

TEST(TimingModelTest, HostEnqueueCostDelaysTheStart) {
  Topology topo = Parse(kSwitchPairs);
  topo.copy_launch_us = 4;
  Timed t(topo, 4);
  ASSERT_TRUE(t.dev().Copy(t.Stream(0), t.Buf(1), t.Buf(0), "c").ok());
  EXPECT_DOUBLE_EQ(t.Run(), 4 + 5 + 1e6 / 50e3);
}

TEST(TimingModelTest, SameGpuCopiesShareItsMemory) {
  Topology topo = Parse(kSwitchPairs);
  topo.memory_gbps = 2000;  // two local copies at 1000 GB/s each need 4000 of read + write
  Timed t(topo, 4);
  ASSERT_TRUE(
      t.dev().Copy(t.Stream(0), t.Buf(0, 0, 1'000'000), t.Buf(0, 1'000'000, 1'000'000), "a").ok());
  ASSERT_TRUE(
      t.dev().Copy(t.Stream(1), t.Buf(1, 0, 1'000'000), t.Buf(1, 1'000'000, 1'000'000), "b").ok());
  // Rank 1 sits on GPU 1: only rank 0's copy uses GPU 0's memory: 1000 GB/s read + written.
  EXPECT_DOUBLE_EQ(t.Run(), 2 + 1e6 / 1000e3);
  ASSERT_TRUE(
      t.dev().Copy(t.Stream(0), t.Buf(0, 0, 1'000'000), t.Buf(0, 1'000'000, 1'000'000), "c").ok());
  ASSERT_TRUE(
      t.dev().Copy(t.Stream(0), t.Buf(0, 0, 1'000'000), t.Buf(0, 1'000'000, 1'000'000), "d").ok());
  // Two on GPU 0: 2000 GB/s of traffic is 500 GB/s of payload each.
  EXPECT_DOUBLE_EQ(t.Run(), 2 + 1e6 / 500e3);
}

TEST(TimingModelTest, ReduceTakesOverheadPlusTrafficOverItsRate) {
  const Topology topo = Parse(kSwitchPairs);
  Timed t(topo, 4);
  // 100,000 bf16 elements: a + b -> c moves 3 x 200,000 bytes at 500 GB/s after 3 us.
  const Operand terms[] = {{t.Buf(0, 0, 200'000)}, {t.Buf(0, 200'000, 200'000)}};
  ASSERT_TRUE(t.dev()
                  .Reduce(t.Stream(0, StreamKind::kCompute), DType::kBF16,
                          Operand{t.Buf(0, 400'000, 200'000)}, terms, 100'000, "add")
                  .ok());
  EXPECT_DOUBLE_EQ(t.Run(), 3 + 600'000 / 500e3);
}

// An int8-block requantizing add of 128,000 elements: i8 a + bf16 b -> i8 c. Encoded, an int8
// operand is 128,000 values + 1,000 fp32 scales = 132,000 bytes: 520,000 bytes of traffic.
// Plain-equivalent: 3 operands x 256,000 bytes = 768,000.
double TimeRequantizingAdd(const Topology& topology) {
  Timed t(topology, 4);
  const MemRef a = t.Buf(0, 0, 132'000), b = t.Buf(0, 200'000, 256'000),
               c = t.Buf(0, 600'000, 132'000);
  EXPECT_TRUE(t.dev().Write(t.Buf(0, 0, 1'000'000), std::vector<uint8_t>(1'000'000, 0)).ok());
  t.Run();
  const Operand terms[] = {{a, Codec::kInt8Block}, {b}};
  EXPECT_TRUE(t.dev()
                  .Reduce(t.Stream(0, StreamKind::kCompute), DType::kBF16,
                          Operand{c, Codec::kInt8Block}, terms, 128'000, "requantizing add")
                  .ok());
  return t.Run();
}

TEST(TimingModelTest, CodedReduceRunsAtTheCodecRateOnPlainEquivalentTraffic) {
  Topology topo = Parse(kSwitchPairs);
  // No codec rate: a coded kernel is timed like a plain one, on its encoded bytes.
  EXPECT_DOUBLE_EQ(TimeRequantizingAdd(topo), 3 + 520'000 / 500e3);
  topo.codec_gbps = 100;
  EXPECT_DOUBLE_EQ(TimeRequantizingAdd(topo), 3 + 768'000 / 100e3);
  // The memory carries the encoded bytes only: at 50 GB/s it, not the codec rate, sets the pace.
  topo.memory_gbps = 50;
  EXPECT_DOUBLE_EQ(TimeRequantizingAdd(topo), 3 + 520'000 / 50e3);
}

// Two requantizing adds at once, on ranks 0 and 1 of one GPU: the time until both are done.
double TimeTwoRequantizingAdds(const Topology& topology) {
  Timed t(topology, 4);
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(t.dev().Write(t.Buf(r, 0, 1'000'000), std::vector<uint8_t>(1'000'000, 0)).ok());
  }
  t.Run();
  for (int r = 0; r < 2; ++r) {
    const Operand terms[] = {{t.Buf(r, 0, 132'000), Codec::kInt8Block},
                             {t.Buf(r, 200'000, 256'000)}};
    EXPECT_TRUE(t.dev()
                    .Reduce(t.Stream(r, StreamKind::kCompute), DType::kBF16,
                            Operand{t.Buf(r, 600'000, 132'000), Codec::kInt8Block}, terms, 128'000,
                            "requantizing add")
                    .ok());
  }
  return t.Run();
}

// One encode (bf16 -> int8 block) of 128,000 elements: 256,000 bytes in, 132,000 out;
// plain-equivalent 2 x 256,000 = 512,000.
double TimeEncode(const Topology& topology) {
  Timed t(topology, 4);
  EXPECT_TRUE(t.dev().Write(t.Buf(0, 0, 1'000'000), std::vector<uint8_t>(1'000'000, 0)).ok());
  t.Run();
  const Operand terms[] = {{t.Buf(0, 200'000, 256'000)}};
  EXPECT_TRUE(t.dev()
                  .Reduce(t.Stream(0, StreamKind::kCompute), DType::kBF16,
                          Operand{t.Buf(0, 600'000, 132'000), Codec::kInt8Block}, terms, 128'000,
                          "encode")
                  .ok());
  return t.Run();
}

TEST(TimingModelTest, EachCodedKindRunsAtItsOwnRate) {
  Topology topo = Parse(kSwitchPairs);
  topo.codec_gbps = 100;
  EXPECT_DOUBLE_EQ(TimeEncode(topo), 3 + 512'000 / 100e3);  // no rate of its own: codec_gbps
  topo.codec_encode_gbps = 400;
  EXPECT_DOUBLE_EQ(TimeEncode(topo), 3 + 512'000 / 400e3);
  EXPECT_DOUBLE_EQ(TimeRequantizingAdd(topo), 3 + 768'000 / 100e3);  // unchanged
  // The GPU's share is counted in requantizing adds: an encode four times as fast takes a quarter
  // as much of it, so a share of 50 leaves it 200.
  topo.codec_gpu_gbps = 50;
  EXPECT_DOUBLE_EQ(TimeEncode(topo), 3 + 512'000 / 200e3);
}

TEST(TimingModelTest, CodedReducesAtOnceShareTheGpusCodecRate) {
  Topology topo = Parse(kSwitchPairs);
  topo.rank_gpus = {0, 0, 1, 1};  // ranks 0 and 1 are virtual ranks of GPU 0
  topo.codec_gbps = 100;
  // No GPU-wide codec rate: each runs at codec_gbps as if alone.
  EXPECT_DOUBLE_EQ(TimeTwoRequantizingAdds(topo), 3 + 768'000 / 100e3);
  // 150 GB/s for the GPU: 75 each.
  topo.codec_gpu_gbps = 150;
  EXPECT_DOUBLE_EQ(TimeTwoRequantizingAdds(topo), 3 + 768'000 / 75e3);
  // One alone still runs at its own 100.
  EXPECT_DOUBLE_EQ(TimeRequantizingAdd(topo), 3 + 768'000 / 100e3);
  // On two GPUs the two do not share.
  topo.rank_gpus = {0, 1, 2, 3};
  EXPECT_DOUBLE_EQ(TimeTwoRequantizingAdds(topo), 3 + 768'000 / 100e3);
}

TEST(TimingModelTest, EfficiencyCurveInterpolatesInLogSize) {
  LinkClass link;
  link.gbps = 100;
  link.efficiency = {{1024, 0.1}, {4096, 0.5}};
  EXPECT_DOUBLE_EQ(link.Efficiency(512), 0.1);
  EXPECT_DOUBLE_EQ(link.Efficiency(2048), 0.3);
  EXPECT_DOUBLE_EQ(link.Efficiency(1 << 20), 0.5);
  EXPECT_DOUBLE_EQ(link.RateGbps(2048), 30);
}

TEST(TimingModelTest, NoTopologyMeansNoTime) {
  SimDevice dev(2, 1);
  MemRef a = *dev.Allocate(0, 1024, "a"), b = *dev.Allocate(1, 1024, "b");
  ASSERT_TRUE(dev.Copy(dev.ComputeStream(0), b, a, "c").ok());
  ASSERT_TRUE(dev.Synchronize().ok());
  EXPECT_EQ(dev.now_us(), 0);
}

// A ring of 4 GPUs joined only by 50 GB/s links, with free kernels, flags and calls: the
// all-reduce must approach 2(W-1)/W * S / link bandwidth.
TEST(TimingModelTest, RingAllReduceApproachesTheAnalyticRingTime) {
  const Topology topo = Parse(R"(name: ideal_ring
gpus: 4
copy_engines: 2
memory_gbps: 1000000
port_gbps: 50
links:
  local: {gbps: 100000, latency_us: 0}
  peer: {gbps: 50, latency_us: 1}
kernel: {launch_us: 0, overhead_us: 0, reduce_gbps: 100000}
flag: {latency_us: 0}
host: {copy_us: 0, event_us: 0}
)");
  const int64_t elems = 16ll << 20;  // 32 MiB of bf16
  // The serial copies' latencies (2(W-1) * pieces us) are the only overhead.
  for (int pieces : {1, 2}) {
    absl::StatusOr<double> us =
        PredictAllReduceUs(topo, 4, elems, DType::kBF16, WireMode::kNative, pieces);
    ASSERT_TRUE(us.ok()) << us.status();
    const double analytic = 2.0 * 3 / 4 * (elems * 2) / 50e3;
    EXPECT_GE(*us, analytic) << "pieces " << pieces;
    EXPECT_LE(*us, analytic * 1.02) << "pieces " << pieces;
  }
}

// Found by a reliability probe (the model never returned): at peer rates of 2e-4 GB/s and below
// a transfer's end time, late in the run, rounded back to the current time, so the transfer
// kept a sliver of bytes that never moved. The flow that defines the next end now ends then.
// Rates this slow are below what a topology file may state (issue 25, item 5: at least
// 1e-3 GB/s), so the model is given them directly.
TEST(TimingModelTest, VerySlowLinksStillFinishAtTheAnalyticRingTime) {
  for (const char* gbps : {"2e-4", "1e-4", "1e-6"}) {
    Topology topo = Parse(R"(name: slow_ring
gpus: 4
copy_engines: 2
memory_gbps: 1000000
port_gbps: 1
links:
  local: {gbps: 100000, latency_us: 0}
  peer: {gbps: 1, latency_us: 1}
kernel: {launch_us: 0, overhead_us: 0, reduce_gbps: 100000}
flag: {latency_us: 0}
host: {copy_us: 0, event_us: 0}
)");
    const double rate = std::stod(gbps);
    topo.port_gbps = topo.peer.gbps = rate;
    const int64_t elems = 1 << 16;  // 128 KiB of bf16
    absl::StatusOr<double> us =
        PredictAllReduceUs(topo, 4, elems, DType::kBF16, WireMode::kNative, 2);
    ASSERT_TRUE(us.ok()) << us.status();
    const double analytic = 2.0 * 3 / 4 * (elems * 2) / (rate * 1e3);
    EXPECT_GE(*us, analytic * (1 - 1e-9)) << gbps;
    EXPECT_LE(*us, analytic * 1.02) << gbps;
  }
}

double RingTimeWithSeed(const Topology& topo, uint64_t seed) {
  SimDevice dev(4, seed);
  EXPECT_TRUE(dev.SetTopology(&topo).ok());
  const int64_t elems = 1 << 20;
  DmaAllReduceOptions o;
  o.max_bytes = elems * 2;
  auto ar = *DmaAllReduce::Create(&dev, o);
  std::vector<TensorView> in, out;
  for (int r = 0; r < 4; ++r) {
    in.push_back(TensorView{*dev.Allocate(r, elems * 2, "in"), DType::kBF16, {elems}, true});
    out.push_back(TensorView{*dev.Allocate(r, elems * 2, "out"), DType::kBF16, {elems}, true});
  }
  const double t0 = dev.now_us();
  EXPECT_TRUE(ar->AllReduce(in, out).ok());
  EXPECT_TRUE(ar->AllReduce(in, out).ok());
  EXPECT_TRUE(dev.Synchronize().ok());
  return dev.now_us() - t0;
}

TEST(TimingModelTest, PredictionDoesNotDependOnTheSeed) {
  for (const char* file : {"h200_virtual_ranks.yaml", "pcie_gen5_4gpu_switch_pairs.yaml"}) {
    absl::StatusOr<Topology> topo =
        LoadTopologyFile(absl::StrFormat("scenarios/topologies/%s", file));
    ASSERT_TRUE(topo.ok()) << topo.status();
    const double first = RingTimeWithSeed(*topo, 1);
    EXPECT_GT(first, 0);
    for (uint64_t seed : {2, 3, 17, 12345}) {
      EXPECT_EQ(RingTimeWithSeed(*topo, seed), first) << file << " seed " << seed;
    }
  }
}

TEST(TimingModelTest, ShippedTopologiesLoadAndPredict) {
  for (const char* file : {"pcie_gen4_4gpu_rc.yaml", "pcie_gen5_4gpu_switch_pairs.yaml",
                           "nvlink_h200_8gpu.yaml", "h200_virtual_ranks.yaml"}) {
    absl::StatusOr<Topology> topo =
        LoadTopologyFile(absl::StrFormat("scenarios/topologies/%s", file));
    ASSERT_TRUE(topo.ok()) << topo.status();
    const int64_t elems = 4ll << 20;
    absl::StatusOr<double> us =
        PredictAllReduceUs(*topo, 4, elems, DType::kBF16, WireMode::kNative, 2);
    ASSERT_TRUE(us.ok()) << us.status();
    const double busbw = AllReduceBusGbps(elems * 2, 4, *us);
    // Never faster than the link rate the file declares.
    const double link = topo->gpus > 1 ? topo->peer.gbps : topo->local.gbps;
    EXPECT_GT(busbw, 0) << file;
    EXPECT_LT(busbw, link) << file;
    std::printf("%-36s 4 ranks bf16 8 MiB: %8.1f us, busbw %7.1f GB/s\n", file, *us, busbw);
  }
}

TEST(TimingModelTest, PredictsCompressedWireModes) {
  absl::StatusOr<Topology> topo = LoadTopologyFile("scenarios/topologies/h200_virtual_ranks.yaml");
  ASSERT_TRUE(topo.ok()) << topo.status();
  for (WireMode wire : {WireMode::kI8, WireMode::kE4M3Ring, WireMode::kI8A2A}) {
    absl::StatusOr<double> us = PredictAllReduceUs(*topo, 4, 1 << 20, DType::kBF16, wire, 2);
    ASSERT_TRUE(us.ok()) << WireModeName(wire) << ": " << us.status();
    EXPECT_GT(*us, 0) << WireModeName(wire);
  }
}

TEST(TimingModelTest, SetTopologyNeedsEnoughRanks) {
  Topology topo = Parse(kSwitchPairs);
  SimDevice dev(8, 1);
  absl::Status s = dev.SetTopology(&topo);
  EXPECT_EQ(s.message(), "set topology: 'test_switch_pairs' holds 4 ranks; the device has 8");
}

}  // namespace
}  // namespace dmalab

// Calibration without a GPU: the fit and the YAML writer on made-up measurements (the written
// file must load with the topology loader and carry the fitted numbers), and the measuring
// code on the simulator, which must recover the topology it times on.
#include "measure/calibration.h"

#include <cmath>
#include <string>

#include "gtest/gtest.h"
#include "measure/calibrate.h"
#include "sim/sim_device.h"
#include "sim/topology.h"

namespace dmalab {
namespace {

// Measurements a GPU with exactly these rates would give: copies of latency 8 us at
// 2000 GB/s (two at once share 4000 GB/s of memory), kernels of 3 us overhead at 3000 GB/s,
// requantizing adds of 4 us at 1000 GB/s of plain-equivalent traffic.
CalibrationMeasurements FakeMeasurements() {
  CalibrationMeasurements m;
  m.gpu_name = "NVIDIA H200";
  m.copy_engines = 3;
  m.sms = 132;
  m.cuda_runtime = 13000;
  m.cuda_driver = 13000;
  m.ranks = 4;
  m.when_utc = "2025-01-31T12:00:00Z";
  m.command = "dmalab calibrate --gpus=1 --ranks=4 --out=t.yaml";
  for (uint64_t bytes = 4096; bytes <= (1ull << 30); bytes *= 4) {
    m.copies.push_back(CopySample{bytes, 1, 8 + bytes / 2000e3});
    m.copies.push_back(CopySample{bytes, 2, 8 + 2 * bytes / 2000e3});
  }
  for (uint64_t bytes : {16ull << 20, 256ull << 20, 1ull << 30}) {
    m.reduces.push_back(ReduceSample{bytes, 3 + 3.0 * bytes / 3000e3});
    m.codec_reduces.push_back(ReduceSample{bytes, 4 + 3.0 * bytes / 1000e3});
  }
  for (uint64_t bytes : {16ull << 20, 1ull << 30}) {
    m.codec_encodes.push_back(ReduceSample{bytes, 4 + 2.0 * bytes / 2500e3});
    m.codec_decodes.push_back(ReduceSample{bytes, 4 + 2.0 * bytes / 3500e3});
    m.codec_dequantizing_adds.push_back(ReduceSample{bytes, 4 + 3.0 * bytes / 1500e3});
  }
  // Codec kernels at once: one alone as above; two share 1750 GB/s; a 64 MiB pair "in 5 us" is
  // host-bound (5 us < 3 x 2 x 2.75): it would claim 80,531 GB/s and stays out.
  for (uint64_t bytes : {256ull << 20, 1ull << 30}) {
    m.codec_concurrent.push_back(CodecConcurrencySample{bytes, 1, 4 + 3.0 * bytes / 1000e3});
    m.codec_concurrent.push_back(CodecConcurrencySample{bytes, 2, 4 + 6.0 * bytes / 1750e3});
  }
  m.codec_concurrent.push_back(CodecConcurrencySample{64 << 20, 2, 5});
  m.copy_enqueue_us = 2.25;
  m.kernel_enqueue_us = 2.75;
  m.event_enqueue_us = 0.75;
  m.flag_hop_us = 4.5;
  // In situ, 10 all-reduces: calls of 3, 3.5 and 0.5 us on average, and 100 us more of host
  // time between the 400 calls (0.25 us each).
  HostCostSample h;
  h.bytes = 256 << 10;
  h.all_reduces = 10;
  h.tallies.copies = {100, 300};
  h.tallies.kernels = {200, 700};
  h.tallies.events = {100, 50};
  h.enqueue_us = 115;
  h.round_us = 130;
  m.host_costs.push_back(h);
  return m;
}

TEST(CalibrationTest, FitLineRelativeRecoversAnExactLine) {
  absl::StatusOr<std::pair<double, double>> fit = FitLineRelative({{0, 5}, {10, 25}, {1000, 2005}});
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->first, 5, 1e-9);
  EXPECT_NEAR(fit->second, 2, 1e-12);
  EXPECT_EQ(FitLineRelative({{3, 5}, {3, 6}}).status().message(),
            "fit: 2 points with fewer than two distinct x");
}

TEST(CalibrationTest, FitRatesRecoversTheRatesBehindTheMeasurements) {
  absl::StatusOr<CalibratedRates> r = FitRates(FakeMeasurements());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->local_gbps, 2000, 1e-6);
  EXPECT_NEAR(r->local_latency_us, 8, 1e-9);
  EXPECT_NEAR(r->memory_gbps, 4000, 1e-6);  // 2 x the 2-stream aggregate of 2000 payload
  EXPECT_NEAR(r->reduce_gbps, 3000, 1e-6);
  EXPECT_NEAR(r->kernel_overhead_us, 3, 1e-9);
  EXPECT_NEAR(r->codec_gbps, 1000, 1e-6);
  EXPECT_NEAR(r->codec_overhead_us, 4, 1e-9);
  // The other kinds: encodes and decodes move 2 operands, dequantizing adds 3.
  EXPECT_NEAR(r->codec_encode_gbps, 2500, 1e-6);
  EXPECT_NEAR(r->codec_decode_gbps, 3500, 1e-6);
  EXPECT_NEAR(r->codec_dequantizing_add_gbps, 1500, 1e-6);
  // The best device-bound aggregate: two 1 GiB adds, 6 GiB of plain-equivalent traffic.
  EXPECT_NEAR(r->codec_gpu_gbps, 6.0 * (1 << 30) / ((4 + 6.0 * (1 << 30) / 1750e3) * 1e3), 1e-6);
  EXPECT_NEAR(r->flag_latency_us, 1.5, 1e-9);  // hop 4.5 - kernel overhead 3
  EXPECT_EQ(r->copy_engines, 3);
  // Host costs in situ, not alone in a loop: the mean timed call plus 0.25 us between calls.
  EXPECT_DOUBLE_EQ(r->between_calls_us, 0.25);
  EXPECT_DOUBLE_EQ(r->copy_launch_us, 3.25);
  EXPECT_DOUBLE_EQ(r->kernel_launch_us, 3.75);
  EXPECT_DOUBLE_EQ(r->event_us, 0.75);
}

TEST(CalibrationTest, TheGpusCodecRateIsNeverBelowOneKernelsAndAbsentWithoutSamples) {
  CalibrationMeasurements m = FakeMeasurements();
  // Two at once no faster than one alone (the second waits): the shared rate is one kernel's.
  for (CodecConcurrencySample& c : m.codec_concurrent) c.us = 4 + 6.0 * c.bytes / 900e3;
  absl::StatusOr<CalibratedRates> r = FitRates(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->codec_gpu_gbps, 1000, 1e-6);
  m.codec_concurrent.clear();
  m.codec_encodes.clear();
  m.codec_decodes.clear();
  m.codec_dequantizing_adds.clear();
  r = FitRates(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->codec_gpu_gbps, 0);
  absl::StatusOr<std::string> yaml = CalibrationYaml(m, 4);
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  EXPECT_EQ(r->codec_encode_gbps, 0);
  EXPECT_EQ(yaml->find("codec_gpu_gbps"), std::string::npos) << *yaml;
  EXPECT_EQ(yaml->find("codec_encode_gbps"), std::string::npos) << *yaml;
  m.codec_concurrent.push_back(CodecConcurrencySample{1 << 30, 2, 0});
  EXPECT_EQ(FitRates(m).status().message(),
            "calibration: codec reduce of 1073741824 bytes x2 took 0 us");
}

TEST(CalibrationTest, HostBoundSamplesStayOutOfTheFits) {
  // Rounds shorter than 3x their enqueue cost time the host: a 16 MiB copy "in 6 us" would
  // claim 2800 GB/s, two at once 5200; a 64 MiB reduce "in 8 us" 25000 GB/s.
  CalibrationMeasurements m = FakeMeasurements();
  m.copies.push_back(CopySample{16 << 20, 1, 6.0});
  m.copies.push_back(CopySample{16 << 20, 2, 6.5});
  m.reduces.push_back(ReduceSample{64 << 20, 8.0});
  absl::StatusOr<CalibratedRates> r = FitRates(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->local_gbps, 2000, 1e-6);
  EXPECT_NEAR(r->local_latency_us, 8, 1e-9);
  EXPECT_NEAR(r->memory_gbps, 4000, 1e-6);
  EXPECT_NEAR(r->reduce_gbps, 3000, 1e-6);
  // Every copy host-bound: nothing tells the device's rate.
  m.copy_enqueue_us = 1e6;
  EXPECT_EQ(FitRates(m).status().message(),
            "calibration: device-bound single copies: fit: 0 points with fewer than two "
            "distinct x");
}

TEST(CalibrationTest, WrittenYamlLoadsWithTheTopologyLoader) {
  absl::StatusOr<std::string> yaml = CalibrationYaml(FakeMeasurements(), /*ranks_per_gpu=*/8);
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  EXPECT_EQ(yaml->rfind("# Calibrated by `dmalab calibrate --gpus=1 --ranks=4 --out=t.yaml`\n"
                        "# at 2025-01-31T12:00:00Z on one NVIDIA H200 (132 SMs, 3 async copy "
                        "engines;",
                        0),
            0u)
      << *yaml;
  absl::StatusOr<Topology> t = ParseTopology(*yaml, "calibrated.yaml");
  ASSERT_TRUE(t.ok()) << t.status() << "\n" << *yaml;
  EXPECT_EQ(t->name, "calibrated_nvidia_h200");
  EXPECT_EQ(t->gpus, 1);
  EXPECT_EQ(t->max_ranks(), 8);
  EXPECT_EQ(t->copy_engines, 3);
  EXPECT_NEAR(t->memory_gbps, 4000, 1e-3);
  EXPECT_NEAR(t->local.gbps, 2000, 1e-3);
  EXPECT_NEAR(t->local.latency_us, 8, 1e-5);
  EXPECT_TRUE(t->local.efficiency.empty());
  EXPECT_NEAR(t->reduce_gbps, 3000, 1e-3);
  EXPECT_NEAR(t->kernel_overhead_us, 3, 1e-5);
  EXPECT_NEAR(t->codec_gbps, 1000, 1e-3);
  EXPECT_NEAR(t->codec_gpu_gbps, 6.0 * (1 << 30) / ((4 + 6.0 * (1 << 30) / 1750e3) * 1e3), 1e-2);
  EXPECT_NEAR(t->codec_encode_gbps, 2500, 1e-3);
  EXPECT_NEAR(t->codec_decode_gbps, 3500, 1e-3);
  EXPECT_NEAR(t->codec_dequantizing_add_gbps, 1500, 1e-3);
  EXPECT_NE(yaml->find("\n# codec decodes (traffic: plain-equivalent):"), std::string::npos)
      << *yaml;
  EXPECT_NE(yaml->find("\n# codec reduces at once (one per rank's compute stream):"),
            std::string::npos)
      << *yaml;
  EXPECT_DOUBLE_EQ(t->kernel_launch_us, 3.75);
  EXPECT_DOUBLE_EQ(t->copy_launch_us, 3.25);
  EXPECT_DOUBLE_EQ(t->event_us, 0.75);
  EXPECT_NE(yaml->find("\n# in situ, per all-reduce:"), std::string::npos) << *yaml;
  EXPECT_DOUBLE_EQ(t->flag_latency_us, 1.5);
}

TEST(CalibrationTest, MissingSamplesAreNamed) {
  CalibrationMeasurements m = FakeMeasurements();
  m.reduces.resize(1);
  EXPECT_EQ(FitRates(m).status().message(),
            "calibration: device-bound reduces: fit: 1 points with fewer than two distinct x");
  m = FakeMeasurements();
  m.codec_reduces.clear();
  EXPECT_EQ(FitRates(m).status().message(),
            "calibration: device-bound codec reduces: fit: 0 points with fewer than two distinct "
            "x");
  m = FakeMeasurements();
  m.flag_hop_us = 0;
  EXPECT_EQ(FitRates(m).status().message(), "calibration: flag hop is 0 us; must be > 0");
  m = FakeMeasurements();
  m.host_costs.clear();
  EXPECT_EQ(FitRates(m).status().message(),
            "calibration: no in-situ host-cost sample (all-reduces enqueued through "
            "HostCostDevice); the model's host costs are fitted from them");
  m = FakeMeasurements();
  m.host_costs[0].tallies.events = {};
  EXPECT_EQ(FitRates(m).status().message(),
            "calibration: the host-cost all-reduces made no event call; every kind is needed");
  m = FakeMeasurements();
  m.host_costs[0].enqueue_us = 1;  // 10 us in all, less than the 1050 us of timed calls
  EXPECT_EQ(FitRates(m).status().message(),
            "calibration: in-situ event cost is -2.1 us (mean 0.5 us, -2.6 us between calls); "
            "must be > 0");
}

// Kernel launches are cheap here so that the eager flag ping-pong is paced by the device.
constexpr char kSimGpu[] = R"(name: sim_gpu
gpus: 1
ranks_per_gpu: 4
copy_engines: 4
memory_gbps: 1600
links:
  local: {gbps: 800, latency_us: 6}
kernel:
  launch_us: 0.5
  overhead_us: 2.5
  reduce_gbps: 1200
  codec_gbps: 600
  codec_gpu_gbps: 900
  codec_encode_gbps: 800
  codec_decode_gbps: 1000
  codec_dequantizing_add_gbps: 700
flag: {latency_us: 1.25}
host: {copy_us: 1.5, event_us: 0.25}
)";

TEST(CalibrationTest, MeasuringTheSimulatorRecoversItsTopology) {
  const Topology topology = *ParseTopology(kSimGpu, "sim_gpu.yaml");
  SimDevice device(4, /*seed=*/3);
  ASSERT_TRUE(device.SetTopology(&topology).ok());
  CalibrationPlan plan;
  plan.copy_bytes = {4096, 64 << 10, 1 << 20, 16 << 20};
  plan.concurrency = {1, 2};
  plan.reduce_bytes = {4096, 256 << 10, 1 << 20, 16 << 20};
  plan.iters = 2;
  // The simulator moves real bytes: few rounds, but enough of the small ones that the first
  // call's enqueue cost, which the host pays once per sample, is amortized.
  plan.bytes_per_sample = 16 << 20;
  plan.max_rounds = 200;
  plan.warmup = 1;
  plan.enqueue_calls = 8;
  plan.flag_round_trips = 64;
  plan.host_cost_bytes = {64 << 10};
  plan.host_cost_all_reduces = 4;
  absl::StatusOr<CalibrationMeasurements> m = MeasureCalibration(
      device, [&] { return device.now_us(); }, plan);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->flag_in_graph);  // the simulator has graphs: the ping-pong is replayed
  m->copy_engines = topology.copy_engines;
  absl::StatusOr<CalibratedRates> r = FitRates(*m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->local_gbps, 800, 8);
  EXPECT_NEAR(r->local_latency_us, 6, 0.1);
  EXPECT_NEAR(r->memory_gbps, 1600, 16);
  EXPECT_NEAR(r->reduce_gbps, 1200, 12);
  EXPECT_NEAR(r->kernel_overhead_us, 2.5, 0.1);
  EXPECT_NEAR(r->codec_gbps, 600, 6);
  EXPECT_NEAR(r->codec_overhead_us, 2.5, 0.1);
  // Two at once share the GPU's 900 GB/s; the best aggregate (16 MiB per operand, each kernel's
  // 2.5 us overhead included) is within 3% of it.
  ASSERT_EQ(m->codec_concurrent.size(), 8u);  // 4 sizes x concurrency 1 and 2
  EXPECT_NEAR(r->codec_gpu_gbps, 900, 27);
  EXPECT_LT(r->codec_gpu_gbps, 900);
  EXPECT_NEAR(r->codec_encode_gbps, 800, 8);
  EXPECT_NEAR(r->codec_decode_gbps, 1000, 10);
  EXPECT_NEAR(r->codec_dequantizing_add_gbps, 700, 7);
  // In situ: every call costs the simulated host what the topology says, and nothing else does.
  ASSERT_EQ(m->host_costs.size(), 1u);
  const HostCallTallies& calls = m->host_costs[0].tallies;
  // 4 all-reduces of 4 ranks, each rank copying 2(W-1) = 6 ring chunks and placing W-1 = 3.
  EXPECT_EQ(calls.copies.calls, 4 * 4 * 9);
  EXPECT_GT(calls.kernels.calls, 0);
  EXPECT_GT(calls.events.calls, 0);
  EXPECT_NEAR(calls.copies.us, 1.5 * calls.copies.calls, 1e-6);
  EXPECT_NEAR(calls.kernels.us, 0.5 * calls.kernels.calls, 1e-6);
  EXPECT_NEAR(calls.events.us, 0.25 * calls.events.calls, 1e-6);
  EXPECT_NEAR(m->host_costs[0].enqueue_us * 4, calls.us(), 1e-6);
  EXPECT_NEAR(r->between_calls_us, 0, 1e-9);
  EXPECT_NEAR(r->copy_launch_us, 1.5, 1e-9);
  EXPECT_NEAR(r->kernel_launch_us, 0.5, 1e-9);
  EXPECT_NEAR(r->event_us, 0.25, 1e-9);
  EXPECT_NEAR(r->flag_latency_us, 1.25, 0.1);
  EXPECT_TRUE(device.findings().empty()) << device.findings().ToString();
}

TEST(CalibrationTest, ReduceSizesMustHoldWholeCodecBlocks) {
  SimDevice device(4, /*seed=*/3);
  CalibrationPlan plan = DefaultCalibrationPlan();
  plan.reduce_bytes = {4096, 1000};
  EXPECT_EQ(MeasureCalibration(
                device, [&] { return device.now_us(); }, plan)
                .status()
                .message(),
            "calibrate: reduce size 1000 bytes is not a whole number of 128-element bf16 codec "
            "blocks");
}

}  // namespace
}  // namespace dmalab

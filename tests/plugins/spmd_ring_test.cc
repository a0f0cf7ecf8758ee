// The built-in ring as an ABI v2 plugin (examples/plugins/dma_ring_v2.cc: the ring core on a
// LockstepDevice, one instance per rank, peers through IPC mappings) against the built-in ring:
// the same verdicts and the same output hashes on every shipped scenario of plain wire, and the
// founding fault injected through --collective-options caught by the v2 host's ownership check.
// Also the lockstep device's host reads (the owner broadcasts) and its mappings (opened once per
// peer, closed before the owner frees).
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/plugin/bootstrap.h"
#include "common/plugin/rank_threads.h"
#include "common/spmd/lockstep_device.h"
#include "dmalab/replay.h"
#include "dmalab/report.h"
#include "dmalab/scenario_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim_device.h"

namespace dmalab {
namespace {

const std::string kRingV2 = absl::StrCat(DMALAB_EXAMPLES_DIR, "/dma_ring_v2.so");

ReplayReport ReplayWith(const Scenario& s, uint64_t seed, const std::string& collective,
                        const std::string& options, const FaultSet& faults = FaultSet()) {
  SimDevice device(s.world, seed);
  ReplayOptions o;
  o.collective = collective;
  o.collective_options = options;
  o.faults = faults;
  o.poll_device_findings = NewFindingsPoller(device);
  absl::StatusOr<ReplayReport> r = Replay(s, &device, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : ReplayReport{};
}

std::vector<uint64_t> Hashes(const ReplayReport& r) {
  std::vector<uint64_t> h;
  for (const AllReduceRecord& a : r.all_reduces) h.push_back(a.hash);
  return h;
}

class RingV2ScenarioTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RingV2ScenarioTest, GivesTheBuiltInRingsVerdictAndHashes) {
  absl::StatusOr<Scenario> s = LoadScenarioFile(GetParam());
  ASSERT_TRUE(s.ok()) << s.status();
  for (uint64_t seed : {uint64_t{1}, uint64_t{2}}) {
    const ReplayReport ring = ReplayWith(*s, seed, "ring", "");
    const ReplayReport v2 = ReplayWith(*s, seed, kRingV2, "");
    ASSERT_FALSE(ring.all_reduces.empty());
    EXPECT_EQ(Hashes(v2), Hashes(ring)) << "seed " << seed;
    EXPECT_EQ(v2.pass(), ring.pass()) << FormatReportText(v2);
    EXPECT_TRUE(v2.pass()) << FormatReportText(v2);
    EXPECT_EQ(v2.findings_total, 0) << FormatReportText(v2);
  }
}

INSTANTIATE_TEST_SUITE_P(Shipped, RingV2ScenarioTest,
                         ::testing::Values("scenarios/explicit_outputs_tp3.yaml",
                                           "scenarios/glm52_tp4_layer0_residual.yaml",
                                           "scenarios/glm5_tp8_decode.yaml",
                                           "scenarios/glm5_tp8_prefill.yaml",
                                           "scenarios/llama70b_tp8_decode.yaml",
                                           "scenarios/llama70b_tp8_prefill.yaml",
                                           "scenarios/mtp_fused_residual_tp4.yaml"),
                         [](const auto& info) {
                           std::string n = info.param.substr(info.param.rfind('/') + 1);
                           return n.substr(0, n.find('.'));
                         });

TEST(RingV2Test, ThePersistentOutputFaultIsCaughtAtItsFirstDefaultFormCall) {
  // The founding incident through the v2 port: the ABI v2 host checks that a default-form
  // result is an allocation the instance made and hands over, so the ring's persistent
  // workspace is a collective_error at the first default-form call; the explicit-form calls
  // before it are unaffected and equal the built-in ring's.
  absl::StatusOr<Scenario> s = LoadScenarioFile("scenarios/mtp_fused_residual_tp4.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  const ReplayReport ring = ReplayWith(*s, 1, "ring", "");
  const ReplayReport v2 = ReplayWith(*s, 1, kRingV2, "inject=persistent-output");
  EXPECT_FALSE(v2.pass());
  ASSERT_FALSE(v2.findings.empty());
  const ReplayFinding& f = v2.findings.front();
  EXPECT_EQ(f.checker, "collective_error");
  EXPECT_THAT(f.step, ::testing::StartsWith("all_reduce 'mtp.embedding'"));
  EXPECT_THAT(f.detail, ::testing::HasSubstr("(default form): rank 0's result"));
  EXPECT_THAT(f.detail, ::testing::HasSubstr("is not an allocation the instance made and owns"));
  std::vector<uint64_t> before = Hashes(ring);
  before.resize(Hashes(v2).size());
  EXPECT_EQ(Hashes(v2), before);
}

TEST(RingV2Test, AnUnknownOptionIsRefusedNamingTheAllowedOnes) {
  absl::StatusOr<Scenario> s = LoadScenarioFile("scenarios/explicit_outputs_tp3.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  SimDevice device(s->world, 1);
  ReplayOptions o;
  o.collective = kRingV2;
  o.collective_options = "wire=i8";
  absl::StatusOr<ReplayReport> r = Replay(*s, &device, o);
  // The plugin says why through its log (stderr); the host names the failed create.
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("create failed"));
}

// W instances on rank threads over one simulator, each with its LockstepDevice.
struct Lockstep {
  explicit Lockstep(int world) : device(world, 1), threads(world, 1), bootstrap(&threads) {}
  std::vector<absl::Status> Run(const std::function<absl::Status(LockstepDevice&)>& body) {
    return threads.Run([&](int rank) {
      AllGatherExchange exchange(
          rank, device.world_size(),
          [&, rank](absl::Span<const uint8_t> send, absl::Span<uint8_t> recv) {
            return bootstrap.AllGather(rank, send, recv);
          },
          [&, rank] { return bootstrap.Barrier(rank); });
      LockstepDevice d(&device, rank, &exchange, "sim");
      return body(d);
    });
  }
  SimDevice device;
  RankThreads threads;
  ThreadBootstrap bootstrap;
};

TEST(LockstepDeviceTest, AHostReadOfAnyRankGivesTheOwnersBytesToEveryInstance) {
  Lockstep l(3);
  const std::vector<absl::Status> st = l.Run([](LockstepDevice& d) -> absl::Status {
    std::vector<MemRef> mems;
    for (int r = 0; r < 3; ++r) {
      absl::StatusOr<MemRef> m = d.Allocate(r, 16, "x");
      if (!m.ok()) return m.status();
      mems.push_back(*m);
      // Every instance writes; only the owner's write happens.
      const std::vector<uint8_t> bytes(16, static_cast<uint8_t>(10 * r + d.rank() + 1));
      if (absl::Status s = d.Write(*m, bytes); !s.ok()) return s;
    }
    for (int r = 0; r < 3; ++r) {
      std::vector<uint8_t> got(16);
      if (absl::Status s = d.Read(mems[r], absl::MakeSpan(got)); !s.ok()) return s;
      if (got != std::vector<uint8_t>(16, static_cast<uint8_t>(11 * r + 1))) {
        return absl::InternalError(
            absl::StrCat("rank ", d.rank(), " read rank ", r, ": ", static_cast<int>(got[0])));
      }
    }
    for (const MemRef& m : mems) {
      if (absl::Status s = d.Free(m); !s.ok()) return s;
    }
    return absl::OkStatus();
  });
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(st[r].ok()) << r << ": " << st[r];
  for (int r = 0; r < 3; ++r) EXPECT_EQ(l.device.LiveAllocations(r), 0) << r;
}

TEST(LockstepDeviceTest, APeerIsMappedOnceOnFirstUseAndClosedBeforeTheOwnerFrees) {
  Lockstep l(2);
  std::vector<int> mappings_after_copies(2, -1), mappings_after_free(2, -1);
  const std::vector<absl::Status> st = l.Run([&](LockstepDevice& d) -> absl::Status {
    std::vector<MemRef> mems;
    for (int r = 0; r < 2; ++r) mems.push_back(*d.Allocate(r, 64, "buf"));
    std::vector<uint8_t> bytes(64, static_cast<uint8_t>(d.rank() + 5));
    if (absl::Status s = d.Write(mems[d.rank()], bytes); !s.ok()) return s;
    // Rank 0's copy engine pushes its buffer into rank 1's, twice: one mapping, opened once.
    const StreamId s0 = *d.CreateStream(0, StreamKind::kCopy, "push");
    for (int i = 0; i < 2; ++i) {
      if (absl::Status s = d.Copy(s0, mems[1], mems[0], "push"); !s.ok()) return s;
    }
    if (absl::Status s = d.Synchronize(); !s.ok()) return s;
    mappings_after_copies[d.rank()] = d.open_mappings();
    std::vector<uint8_t> got(64);
    if (absl::Status s = d.Read(mems[1], absl::MakeSpan(got)); !s.ok()) return s;
    if (got != std::vector<uint8_t>(64, 5)) return absl::InternalError("rank 1 lacks the push");
    for (const MemRef& m : mems) {
      if (absl::Status s = d.Free(m); !s.ok()) return s;
    }
    mappings_after_free[d.rank()] = d.open_mappings();
    return absl::OkStatus();
  });
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(st[r].ok()) << r << ": " << st[r];
  EXPECT_EQ(mappings_after_copies, (std::vector<int>{1, 0}));
  EXPECT_EQ(mappings_after_free, (std::vector<int>{0, 0}));
  EXPECT_EQ(l.device.findings().total(), 0);
}

TEST(LockstepDeviceTest, AnEventUsedAcrossRanksIsRefusedNamingBoth) {
  Lockstep l(2);
  const std::vector<absl::Status> st = l.Run([](LockstepDevice& d) -> absl::Status {
    const EventId e = *d.CreateEvent(0);
    return d.RecordEvent(e, d.ComputeStream(1));
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(st[r].code(), absl::StatusCode::kUnimplemented);
    EXPECT_EQ(st[r].message(),
              "record_event: event of rank 0 on a stream of rank 1; in lockstep an event stays "
              "within its rank (ranks meet through flags)");
  }
}

}  // namespace
}  // namespace dmalab

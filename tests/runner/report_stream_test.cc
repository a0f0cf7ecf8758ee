// The report a worker streams to its parent step by step (issue 25, item 3): applied message by
// message, the parent's copy is the worker's report exactly (text and JSON byte for byte), at
// every step; a malformed message is an error that leaves the copy as it was, never a crash.
#include "runner/report_stream.h"

#include <string>
#include <vector>

#include "dmalab/report.h"
#include "dmalab/scenario_loader.h"
#include "gtest/gtest.h"
#include "sim/sim_device.h"

namespace dmalab {
namespace {

std::string Text(const ReplayReport& r) { return FormatReportText(r) + FormatReportJson(r); }

// Replays `file` with `faults`, streaming through a writer into a reader; returns the messages.
std::vector<std::string> Stream(const std::string& file, const std::string& faults,
                                ReplayReport* returned, ReportDeltaReader* reader,
                                std::vector<std::string>* states) {
  absl::StatusOr<Scenario> s = LoadScenarioFile(file);
  EXPECT_TRUE(s.ok()) << s.status();
  SimDevice device(s->world, 3);
  ReplayOptions options;
  options.faults = *FaultSet::Parse(faults);
  options.poll_device_findings = NewFindingsPoller(device);
  ReportDeltaWriter writer;
  std::vector<std::string> messages;
  options.observer = [&](const ReplayStepPlace& next, const ReplayReport& so_far) {
    messages.push_back(writer.Encode(next, so_far));
    EXPECT_TRUE(reader->Apply(messages.back()).ok());
    EXPECT_EQ(reader->place().step, next.step);
    // The parent's copy is the worker's report at every step, not only at the end.
    EXPECT_EQ(Text(reader->report()), Text(so_far)) << next.step;
    states->push_back(Text(so_far));
  };
  absl::StatusOr<ReplayReport> r = Replay(*s, &device, options);
  EXPECT_TRUE(r.ok()) << r.status();
  r->scheduling_seed = 3;
  messages.push_back(writer.Encode({0, "finished", "finished", "end", 0, 0}, *r));
  EXPECT_TRUE(reader->Apply(messages.back()).ok());
  *returned = *std::move(r);
  return messages;
}

TEST(ReportStreamTest, TheParentsCopyIsTheWorkersReportAtEveryStep) {
  // Grouped findings that grow over a repeat (counts, ranks, iteration ranges), records, the
  // retained summary and the scheduling seed set after the run.
  for (const char* faults : {"none", "persistent-output"}) {
    ReplayReport returned;
    ReportDeltaReader reader;
    std::vector<std::string> states;
    Stream("tests/cli/grouped_findings_tp2.yaml", faults, &returned, &reader, &states);
    EXPECT_EQ(Text(reader.report()), Text(returned)) << faults;
    EXPECT_EQ(reader.report().scheduling_seed, std::optional<uint64_t>(3));
    EXPECT_EQ(returned.pass(), std::string(faults) == "none");
  }
}

TEST(ReportStreamTest, AMalformedMessageIsAnErrorAndChangesNothing) {
  ReplayReport returned;
  ReportDeltaReader source;
  std::vector<std::string> states;
  const std::vector<std::string> messages = Stream(
      "tests/cli/grouped_findings_tp2.yaml", "persistent-output", &returned, &source, &states);
  ASSERT_GT(messages.size(), 5u);
  // Every message cut short, every one with a byte changed, and one applied twice (out of order).
  ReportDeltaReader reader;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string before = Text(reader.report());
    for (size_t cut : {size_t{0}, size_t{1}, messages[i].size() / 2, messages[i].size() - 1}) {
      EXPECT_FALSE(reader.Apply(messages[i].substr(0, cut)).ok()) << i << " cut at " << cut;
      EXPECT_EQ(Text(reader.report()), before);
    }
    std::string extra = messages[i] + "x";
    EXPECT_FALSE(reader.Apply(extra).ok());
    for (size_t at = 0; at < messages[i].size(); at += 7) {
      std::string flipped = messages[i];
      flipped[at] = static_cast<char>(flipped[at] ^ 0xff);
      ReportDeltaReader copy = reader;
      (void)copy.Apply(flipped);  // an error or a different report; never a crash
    }
    ASSERT_TRUE(reader.Apply(messages[i]).ok()) << i;
  }
  EXPECT_EQ(Text(reader.report()), Text(returned));
  // A finding or a record sent again (out of order) is refused.
  ReportDeltaReader twice;
  size_t first_with_findings = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    ASSERT_TRUE(twice.Apply(messages[i]).ok());
    if (!twice.report().findings.empty()) {
      first_with_findings = i;
      break;
    }
  }
  ASSERT_GT(first_with_findings, 0u);
  const std::string before = Text(twice.report());
  const absl::Status again = twice.Apply(messages[first_with_findings]);
  EXPECT_EQ(again.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(again.message() == "a malformed report message: findings out of order" ||
              again.message() == "a malformed report message: records out of order")
      << again.message();
  EXPECT_EQ(Text(twice.report()), before);
}

TEST(ReportStreamTest, AStreamSendingMoreThanAReportKeepsIsMalformed) {
  // A worker can write anything; the parent's copy stays within the report's bounds.
  ReplayReport returned;
  ReportDeltaReader source;
  std::vector<std::string> states;
  const std::vector<std::string> messages = Stream(
      "tests/cli/grouped_findings_tp2.yaml", "persistent-output", &returned, &source, &states);
  ASSERT_GE(returned.findings.size(), 2u);
  ReportDeltaReader small(/*max_findings=*/1, /*max_records=*/10000);
  absl::Status last;
  for (const std::string& m : messages) {
    last = small.Apply(m);
    if (!last.ok()) break;
  }
  EXPECT_EQ(last.message(),
            "a malformed report message: more records or findings than a report keeps");
  EXPECT_LE(small.report().findings.size(), 1u);
}

}  // namespace
}  // namespace dmalab

// Carrying a replay report from a worker process to its parent step by step
// (runner/isolated_replay.h): before every step the worker encodes what changed in its report since
// its last message and where it goes next; the parent applies each message to its own copy. So the
// parent holds the report of every step the worker finished, whatever becomes of the worker.
//
// A message is a delta: new all-reduce records and findings (both only grow), the finding groups
// whose count changed, the counters and summary, the header when it changed, and the next place.
// The parent checks every message (a collective under test can scribble on any memory of its
// process, the pipe's included): a malformed one is an error, never a crash or a wrong report.
#ifndef DMALAB_RUNNER_REPORT_STREAM_H_
#define DMALAB_RUNNER_REPORT_STREAM_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "dmalab/replay.h"

namespace dmalab {

// The worker's side.
class ReportDeltaWriter {
 public:
  // The message that brings a reader from the last state encoded to `report`, at `next`.
  std::string Encode(const ReplayStepPlace& next, const ReplayReport& report);

 private:
  size_t records_sent_ = 0;
  size_t findings_sent_ = 0;
  std::vector<int64_t> group_counts_sent_;  // FindingGroup::count as last sent
  std::string header_sent_;
};

// The parent's side.
class ReportDeltaReader {
 public:
  // A report keeps at most `max_findings` findings and `max_records` all-reduce records
  // (ReplayOptions' bounds); a stream that sends more is malformed, so the parent's memory stays
  // bounded whatever a worker sends.
  explicit ReportDeltaReader(int max_findings = ReplayOptions{}.max_findings,
                             int64_t max_records = ReplayOptions{}.max_all_reduce_records)
      : max_findings_(max_findings), max_records_(max_records) {}

  // Applies one message of ReportDeltaWriter. An error says what was malformed; the report and
  // place then stay as the last good message left them.
  absl::Status Apply(std::string_view message);

  const ReplayReport& report() const { return report_; }
  ReplayReport& report() { return report_; }
  // Where the worker was going when it wrote its last message; index 0 and "" before any.
  const ReplayStepPlace& place() const { return place_; }
  // Whether any message was applied.
  bool started() const { return started_; }

 private:
  int max_findings_;
  int64_t max_records_;
  ReplayReport report_;
  ReplayStepPlace place_;
  bool started_ = false;
};

}  // namespace dmalab

#endif  // DMALAB_RUNNER_REPORT_STREAM_H_

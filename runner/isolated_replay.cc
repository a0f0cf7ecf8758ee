#include "runner/isolated_replay.h"

#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"
#include "runner/isolated_run.h"
#include "runner/report_stream.h"

namespace dmalab {
namespace {

// The worker's messages: a report delta, or the error Replay returned.
constexpr char kDelta = 'D';
constexpr char kError = 'E';

}  // namespace

absl::StatusOr<ReplayReport> ReplayInWorker(
    const std::function<absl::StatusOr<ReplayReport>(const ReplayObserver& observer)>& replay,
    const Scenario& scenario, int hang_seconds, int max_findings) {
  const auto work = [&](WorkerChannel& channel) {
    ReportDeltaWriter writer;
    const ReplayObserver observer = [&](const ReplayStepPlace& next, const ReplayReport& so_far) {
      channel.Send(std::string(1, kDelta) + writer.Encode(next, so_far));
    };
    absl::StatusOr<ReplayReport> report = replay(observer);
    if (!report.ok()) {
      channel.Send(absl::StrCat(std::string(1, kError),
                                std::string(1, static_cast<char>(report.status().code())),
                                report.status().message()));
      return;
    }
    // The report as returned (the caller may have added to it after the last step).
    channel.Send(std::string(1, kDelta) +
                 writer.Encode({0, "finished", "finished", "end", 0, 0}, *report));
  };
  ReportDeltaReader reader(max_findings);
  absl::Status error;
  const auto on_message = [&](std::string_view m) -> absl::Status {
    if (!m.empty() && m[0] == kDelta) return reader.Apply(m.substr(1));
    if (m.size() >= 2 && m[0] == kError && error.ok()) {
      const auto code = static_cast<absl::StatusCode>(static_cast<unsigned char>(m[1]));
      error = absl::Status(code == absl::StatusCode::kOk ? absl::StatusCode::kUnknown : code,
                           absl::string_view(m.data() + 2, m.size() - 2));
      return absl::OkStatus();
    }
    return absl::DataLossError("a message of an unknown kind");
  };
  DMALAB_ASSIGN_OR_RETURN(WorkerEnd end, RunIsolated(work, on_message, hang_seconds));
  if (end.how == WorkerEnd::How::kFinished) {
    if (!error.ok()) return error;
    if (reader.started()) return std::move(reader.report());
    end.how = WorkerEnd::How::kExited;  // finished without a report: never by the code above
  }
  ReplayReport report = std::move(reader.report());
  if (!reader.started()) {
    report.scenario = scenario.name;
    report.file = scenario.file;
    report.world = scenario.world;
    report.seed = scenario.seed;
  }
  const ReplayStepPlace& at = reader.place();
  ReplayFinding f;
  f.kind = end.how == WorkerEnd::How::kHung ? ReplayFindingKind::kCollectiveHang
                                            : ReplayFindingKind::kCollectiveCrash;
  f.checker = std::string(ReplayFindingKindName(f.kind));
  f.step_index = at.step_index;
  f.step = at.step.empty() ? "setup" : at.step;
  f.step_desc = at.step_desc.empty() ? f.step : at.step_desc;
  f.step_id = at.step_id.empty() ? "setup" : at.step_id;
  f.iteration = at.iteration;
  f.iterations = at.iterations;
  f.detail = absl::StrFormat(
      "the replay's worker process %s in %s%s; the report holds every step before it",
      end.Describe(), f.step,
      end.how == WorkerEnd::How::kExited || end.how == WorkerEnd::How::kSignaled
          ? " (the collective under test ran there)"
          : "");
  AddFindingTo(report, std::move(f), max_findings);
  return report;
}

}  // namespace dmalab

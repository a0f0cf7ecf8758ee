#include "common/scenario/replay_expectations.h"

#include "absl/strings/str_format.h"

namespace dmalab {

const Expectation* FindExpectation(const Scenario& scenario, const FaultSet& faults) {
  for (const Expectation& e : scenario.expect) {
    if (e.faults == faults.ToString()) return &e;
  }
  return nullptr;
}

std::vector<std::string> CompareWithExpectation(const Expectation& expect,
                                                const ReplayReport& report) {
  std::vector<std::string> diffs;
  auto pass_fail = [](bool pass) { return pass ? "PASS" : "FAIL"; };
  if (expect.pass != report.pass()) {
    diffs.push_back(absl::StrFormat("status: expected %s, got %s", pass_fail(expect.pass),
                                    pass_fail(report.pass())));
  }
  if (expect.pointer_alias && *expect.pointer_alias != report.pointer_alias) {
    diffs.push_back(absl::StrFormat("pointer_alias: expected %s, got %s",
                                    *expect.pointer_alias ? "true" : "false",
                                    report.pointer_alias ? "true" : "false"));
  }
  if (expect.retained_mismatches && *expect.retained_mismatches != report.retained_mismatches) {
    diffs.push_back(absl::StrFormat("retained_mismatches: expected %d, got %d",
                                    *expect.retained_mismatches, report.retained_mismatches));
  }
  if (expect.rank_consistent && *expect.rank_consistent != report.rank_consistent) {
    diffs.push_back(absl::StrFormat("rank_consistent: expected %s, got %s",
                                    *expect.rank_consistent ? "true" : "false",
                                    report.rank_consistent ? "true" : "false"));
  }
  return diffs;
}

std::string ExpectationLine(const Expectation& expect, const ReplayReport& report,
                            const std::vector<std::string>& diffs) {
  if (diffs.empty()) return "expectation: met";
  const std::string collective = report.collective.empty() ? "none" : report.collective;
  if (expect.pass && !report.pass()) {
    return absl::StrFormat(
        "expectation: NOT met: the collective under test (%s) fails this scenario, which states "
        "PASS for faults=%s: a bug of the collective, shown by the findings above",
        collective, expect.faults);
  }
  return absl::StrFormat(
      "expectation: NOT met: the run's verdict (collective %s, faults=%s) differs from the one "
      "the scenario states",
      collective, expect.faults);
}

}  // namespace dmalab

// Comparing a replay report with the verdicts a scenario expects (its `expect:` list), so a
// test suite or a tool can replay every scenario file under each fault set and check it.
#ifndef DMALAB_COMMON_SCENARIO_REPLAY_EXPECTATIONS_H_
#define DMALAB_COMMON_SCENARIO_REPLAY_EXPECTATIONS_H_

#include <string>
#include <vector>

#include "dmalab/faults.h"
#include "dmalab/replay.h"
#include "dmalab/scenario.h"

namespace dmalab {

// The scenario's expected verdict for `faults`, or nullptr when it states none.
const Expectation* FindExpectation(const Scenario& scenario, const FaultSet& faults);

// Differences between an expectation and a report, one line each ("status: expected FAIL, got
// PASS"); empty when the report meets it.
std::vector<std::string> CompareWithExpectation(const Expectation& expect,
                                                const ReplayReport& report);

// The report's expectation line: "expectation: met", or, when `diffs` is not empty, a line that
// says whose failure it is. A stated PASS that the run FAILs is the collective under test failing
// the scenario (its findings are above the line); any other difference is the run's verdict
// differing from the stated one (e.g. an injected fault the checks did not catch).
std::string ExpectationLine(const Expectation& expect, const ReplayReport& report,
                            const std::vector<std::string>& diffs);

}  // namespace dmalab

#endif  // DMALAB_COMMON_SCENARIO_REPLAY_EXPECTATIONS_H_

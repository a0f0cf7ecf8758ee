// Formatting of replay reports: human-readable text and JSON.
//
// The text report has one line per all-reduce (with its output hash), one line per finding
// (step, rank, storage), and ends with the summary line
//   pointer_alias=true|false  retained_mismatches=X / Y  rank_consistent=true|false
//   status=PASS|FAIL
// where X and Y carry thousands separators (16,803,840). The JSON report carries the same facts
// with plain numbers; its "summary" object has the keys of the summary line.
#ifndef DMALAB_COMMON_SCENARIO_REPORT_H_
#define DMALAB_COMMON_SCENARIO_REPORT_H_

#include <cstdint>
#include <string>

#include "common/core/tensor.h"
#include "common/scenario/replay.h"

namespace dmalab {

// "true" or "false".
const char* BoolText(bool b);

// "16,803,840"; "-1,024"; "0".
std::string WithThousands(int64_t value);

// "rank 0 [0x1000, 0x2000) alloc 3".
std::string FormatStorage(const MemRef& mem);

// The summary line (see the file comment), without a trailing newline.
std::string SummaryLine(const ReplayReport& report);

// The whole text report, lines ending in '\n'.
std::string FormatReportText(const ReplayReport& report);

// The report as one JSON object (no trailing newline).
std::string FormatReportJson(const ReplayReport& report);

}  // namespace dmalab

#endif  // DMALAB_COMMON_SCENARIO_REPORT_H_

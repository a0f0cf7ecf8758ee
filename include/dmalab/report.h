// Formatting of replay reports: human-readable text and JSON.
//
// The text report has one line per all-reduce (with its output hash), one line per finding
// (step, rank, storage), and ends with the summary line
//   pointer_alias=true|false  retained_mismatches=X / Y  rank_consistent=true|false
//   status=PASS|FAIL
// where X and Y carry thousands separators (16,803,840). The JSON report carries the same facts
// with plain numbers; its "summary" object has the keys of the summary line.
#ifndef DMALAB_REPORT_H_
#define DMALAB_REPORT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "dmalab/replay.h"
#include "dmalab/tensor.h"

namespace dmalab {

// dmalab's JSON writer (in the dmalab_core library), for WriteJsonPreamble.
class JsonWriter;

// "true" or "false".
const char* BoolText(bool b);

// "16,803,840"; "-1,024"; "0".
std::string WithThousands(int64_t value);

// "rank 0 [0x1000, 0x2000) alloc 3".
std::string FormatStorage(const MemRef& mem);

// The summary line (see the file comment), without a trailing newline.
std::string SummaryLine(const ReplayReport& report);

// One distinct finding on one line: "FINDING <checker>: step N <step>[, iterations 1-3 of 3],
// ranks 0-3 (12 findings, the first): <detail of the first>[; storage: <its storage>]".
std::string FormatFindingGroup(const FindingGroup& group);

// "ERROR SUMMARY: 18 findings (5 distinct)" (compute-sanitizer style; "0 findings" when clean).
std::string ErrorSummaryLine(const ReplayReport& report);

// The keys every JSON document of dmalab starts with (docs/json.md): schema ("dmalab.<command>"),
// schema_version, tool, tool_version, command.
void WriteJsonPreamble(JsonWriter& w, std::string_view command);

// The whole text report, lines ending in '\n': the header, one line per all-reduce, one line
// per distinct finding (FormatFindingGroup), the ERROR SUMMARY line, the summary line.
std::string FormatReportText(const ReplayReport& report);

// The report as one JSON object (no trailing newline).
std::string FormatReportJson(const ReplayReport& report);

}  // namespace dmalab

#endif  // DMALAB_REPORT_H_

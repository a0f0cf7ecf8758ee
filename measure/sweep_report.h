// The sweep's outputs: the nccl-tests style table, the CSV that tools/plot_bandwidth.py reads,
// and a JSON report. Column meanings are in docs/bandwidth.md.
#ifndef DMALAB_MEASURE_SWEEP_REPORT_H_
#define DMALAB_MEASURE_SWEEP_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/types/span.h"
#include "measure/sweep.h"

namespace dmalab {

// What a sweep ran on, for the table's header, the CSV's trailing columns and the JSON.
struct SweepContext {
  std::string backend;   // "sim" or "hw"
  std::string device;    // Device::name()
  std::string topology;  // sim: the topology file; empty on hw
  int ranks = 0;
  std::optional<uint64_t> seed;  // sim: the scheduling seed
  SweepOptions options;
};

// Comment lines ("# ...") describing the run and the table's column headings.
std::string SweepTableHeader(const SweepContext& context);
// One table line (newline-terminated).
std::string SweepTableRow(const SweepRow& row);

// The CSV's header line: size_bytes,count,type,wire,oop_time_us,... (newline-terminated).
std::string SweepCsvHeader();
// One CSV line; unset counts (no check) are empty fields.
std::string SweepCsvRow(const SweepContext& context, const SweepRow& row);
// Header and rows.
std::string SweepCsv(const SweepContext& context, absl::Span<const SweepRow> rows);

// {"command": "sweep", ..., "rows": [{...}, ...]}; unset counts are null.
std::string SweepJson(const SweepContext& context, absl::Span<const SweepRow> rows);

}  // namespace dmalab

#endif  // DMALAB_MEASURE_SWEEP_REPORT_H_

// The sweep's outputs: the nccl-tests table and JSON, the CSV that tools/plot_bandwidth.py reads,
// and a JSON report. Column meanings are in docs/bandwidth.md.
#ifndef DMALAB_MEASURE_SWEEP_REPORT_H_
#define DMALAB_MEASURE_SWEEP_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "measure/sweep.h"

namespace dmalab {

// One rank's line under "# Using devices", as nccl-tests prints it:
// "#  Rank  0 Group  0 Pid  12345 on   hostname device  0 [0000:9a:00] NVIDIA H200".
struct SweepRankDevice {
  int rank = 0;
  int pid = 0;
  std::string host;
  int device = 0;      // CUDA ordinal; the simulator: the topology's GPU of the rank
  std::string bus_id;  // "0000:9a:00" (PCI domain:bus:device); the simulator: "sim"
  std::string info;    // "NVIDIA H200"; the simulator: the device and topology
};

// What a sweep ran on, for the table's header, the CSV's trailing columns and the JSON.
struct SweepContext {
  std::string backend;   // "sim" or "hw"
  std::string device;    // Device::name()
  std::string topology;  // sim: the topology file; empty on hw
  int ranks = 0;
  std::optional<uint64_t> seed;  // sim: the scheduling seed
  int gpus = 1;
  SweepOptions options;
  std::vector<SweepRankDevice> devices;  // one per rank
  // For the nccl-tests JSON: the command line, and when the sweep started and ended
  // ("2025-01-31 12:00:00", local time as nccl-tests writes it).
  std::vector<std::string> args;
  std::string start_time, end_time;
};

// The nccl-tests name of a dtype: "bfloat16", "half", "float".
std::string_view NcclTypeName(DType dtype);
// nccl-tests' number cells: `width` characters, with fewer decimals as the value grows (2, 1,
// 0), and an exponent once even whole numbers do not fit.
std::string NcclNumber(double value, int width);

// The table is nccl-tests' all_reduce_perf table (the header lines, "# Using devices", the
// columns size count type redop root, then time algbw busbw #wrong out of place and in place,
// the "# Out of bounds values" and "# Avg bus bandwidth" trailer), so that its parsers read it;
// dmalab's columns follow nccl-tests' on each line: wire, #round out of place and in place, sol,
// %sol.
//
// Comment lines ("# ...") describing the run, the devices and the table's column headings.
std::string SweepTableHeader(const SweepContext& context);
// One table line (newline-terminated).
std::string SweepTableRow(const SweepRow& row);
// The trailer: wrong elements over all rows and modes, the mean busbw over all rows and modes
// (as nccl-tests averages), and the end line.
std::string SweepTableFooter(const SweepContext& context, absl::Span<const SweepRow> rows);
// Mean of every row's out-of-place and in-place busbw; 0 without rows.
double AverageBusBandwidth(absl::Span<const SweepRow> rows);

// The CSV's header line: size_bytes,count,type,wire,oop_time_us,... (newline-terminated).
std::string SweepCsvHeader();
// One CSV line; unset counts (no check) are empty fields.
std::string SweepCsvRow(const SweepContext& context, const SweepRow& row);
// Header and rows.
std::string SweepCsv(const SweepContext& context, absl::Span<const SweepRow> rows);

// {"command": "sweep", ..., "rows": [{...}, ...]}; unset counts are null.
std::string SweepJson(const SweepContext& context, absl::Span<const SweepRow> rows);

// nccl-tests' JSON report (version 2, `all_reduce_perf -J FILE`): version, start_time, args, env,
// nccl_version, config (with devices), results (size, count, type, redop, root, out_of_place and
// in_place {time, alg_bw, bus_bw, nwrong}, actual_iterations, experiment_name), out_of_bounds,
// average_bus_bandwidth, errors, end_time; nccl_version is 0 (no NCCL) and env is empty. dmalab's
// own numbers ride along under "dmalab" keys, at the top and in each result.
std::string SweepNcclJson(const SweepContext& context, absl::Span<const SweepRow> rows);

}  // namespace dmalab

#endif  // DMALAB_MEASURE_SWEEP_REPORT_H_

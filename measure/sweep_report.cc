#include "measure/sweep_report.h"

#include <cmath>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/core/enum_table.h"
#include "common/core/json_writer.h"
#include "common/core/version.h"

namespace dmalab {
namespace {

std::string CountText(const std::optional<int64_t>& n, std::string_view unset) {
  return n ? absl::StrFormat("%d", *n) : std::string(unset);
}

std::string JsonString(std::string_view s) { return JsonWriter::Quote(s); }

// A measured figure: %.9g, or null when not finite (a zero time gives an infinite bandwidth),
// as JSON has no inf or nan.
std::string JsonFigure(double v) { return std::isfinite(v) ? absl::StrFormat("%.9g", v) : "null"; }

std::string JsonTiming(const SweepTiming& t) {
  return absl::StrFormat(
      "{\"time_us\": %s, \"algbw_gbps\": %s, \"busbw_gbps\": %s, \"wrong\": %s, "
      "\"rounded\": %s}",
      JsonFigure(t.time_us), JsonFigure(t.algbw_gbps), JsonFigure(t.busbw_gbps),
      CountText(t.wrong, "null"), CountText(t.rounded, "null"));
}

}  // namespace

std::string_view NcclTypeName(DType dtype) {
  static constexpr auto kNcclTypes = MakeEnumTable<DType>(
      {{DType::kBF16, "bfloat16"}, {DType::kFP16, "half"}, {DType::kFP32, "float"}});
  return kNcclTypes.Name(dtype, "unknown");
}

std::string NcclNumber(double value, int width) {
  int digits = 0;  // of the whole part; 0 below 1
  for (double p = 1; value >= p && digits < 400; p *= 10) ++digits;
  if (digits < width - 2) return absl::StrFormat("%*.2f", width, value);
  if (digits < width - 1) return absl::StrFormat("%*.1f", width, value);
  if (digits < width + 1) return absl::StrFormat("%*.0f", width, value);
  return width >= 7 ? absl::StrFormat("%*.1e", width, value)
                    : absl::StrFormat("%*.0e", width, value);
}

namespace {

constexpr char kProgram[] = "dmalab_sweep";

// nccl-tests' five leading columns, then ours.
std::string ColumnLine(std::string_view size, std::string_view count, std::string_view type,
                       std::string_view redop, std::string_view root,
                       const std::vector<std::string_view>& rest) {
  std::string line = absl::StrFormat("# %10s  %12s  %8s  %6s  %6s", size, count, type, redop, root);
  const int widths[] = {7, 6, 6, 6, 7, 6, 6, 6, 9, 7, 7, 9, 6};
  for (size_t i = 0; i < rest.size(); ++i) line += absl::StrFormat("  %*s", widths[i], rest[i]);
  return line + "\n";
}

int64_t WrongTotal(absl::Span<const SweepRow> rows) {
  int64_t wrong = 0;
  for (const SweepRow& r : rows) {
    wrong += r.out_of_place.wrong.value_or(0) + r.in_place.wrong.value_or(0);
  }
  return wrong;
}

}  // namespace

std::string SweepTableHeader(const SweepContext& c) {
  const SweepOptions& o = c.options;
  std::string h = absl::StrFormat(
      "# dmalab sweep: collective %s, backend %s (device %s%s), %d ranks on %d GPU(s), %s, wire "
      "%s, "
      "pieces %d\n"
      "# -n %d -w %d -c %d -G %d; %s\n",
      o.collective, c.backend, c.device,
      c.topology.empty() ? "" : absl::StrCat(", topology ", c.topology), c.ranks, c.gpus,
      DTypeName(o.dtype), WireModeName(o.wire), o.pieces, o.iters, o.warmup, o.check ? 1 : 0,
      o.graph ? 1 : 0,
      c.backend == "sim" ? "times are the timing model's prediction (SimDevice::now_us)"
                         : "times are host wall clock around n calls between two synchronizes");
  h += absl::StrFormat("# Collective test starting: %s\n", kProgram);
  h += absl::StrFormat(
      "# nThread 1 nGpus %d minBytes %d maxBytes %d step: %d(factor) warmup iters: %d iters: %d "
      "agg iters: 1 validation: %d graph: %d unalign: 0\n#\n",
      c.ranks, o.min_bytes, o.max_bytes, o.factor, o.warmup, o.iters, o.check ? 1 : 0,
      o.graph ? 1 : 0);
  h += "# Using devices\n";
  for (const SweepRankDevice& d : c.devices) {
    h += absl::StrFormat("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s\n", d.rank, 0,
                         d.pid, d.host, d.device, d.bus_id, d.info);
  }
  h += "#\n";
  if (o.check) {
    h += o.wire == WireMode::kNative
             ? "# #wrong: elements (all ranks) that differ from the exact sum of the integer "
               "inputs\n"
             : "# compressed wire: #wrong counts elements of ranks 1..W-1 that differ from rank "
               "0's;\n# #round counts elements (all ranks) that differ from the exact sum: the "
               "wire's rounding\n";
  }
  h += "# sol: bare copies of the bytes the ring sends, at its hop pattern, timed as the ring "
       "is;\n# %sol = sol / out-of-place time\n#\n";
  h += absl::StrFormat(
      "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place       "
      "     %9s  %7s  %7s  %9s  %6s\n",
      "", "", "", "", "", "", "oop", "ip", "", "");
  h += ColumnLine("size", "count", "type", "redop", "root",
                  {"time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", "wire",
                   "#round", "#round", "sol", "%sol"});
  h += ColumnLine(
      "(B)", "(elements)", "", "", "",
      {"(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", "", "", "", "(us)", ""});
  return h;
}

std::string SweepTableRow(const SweepRow& r) {
  const auto mode = [](const SweepTiming& t) {
    std::string cells = absl::StrFormat("  %7s  %6s  %6s", NcclNumber(t.time_us, 7),
                                        NcclNumber(t.algbw_gbps, 6), NcclNumber(t.busbw_gbps, 6));
    return cells + (t.wrong ? absl::StrFormat("  %6g", static_cast<double>(*t.wrong))
                            : std::string("    N/A"));
  };
  return absl::StrFormat("%12d  %12d  %8s  %6s  %6d%s%s  %9s  %7s  %7s  %9s  %6.1f\n", r.bytes,
                         r.count, NcclTypeName(r.dtype), "sum", -1, mode(r.out_of_place),
                         mode(r.in_place), WireModeName(r.wire),
                         CountText(r.out_of_place.rounded, "-"), CountText(r.in_place.rounded, "-"),
                         NcclNumber(r.sol_us, 9), r.pct_sol);
}

double AverageBusBandwidth(absl::Span<const SweepRow> rows) {
  if (rows.empty()) return 0;
  double sum = 0;
  for (const SweepRow& r : rows) sum += r.out_of_place.busbw_gbps + r.in_place.busbw_gbps;
  return sum / (2.0 * rows.size());
}

std::string SweepTableFooter(const SweepContext& /*context*/, absl::Span<const SweepRow> rows) {
  const int64_t wrong = WrongTotal(rows);
  return absl::StrFormat("# %-20s : %d %s\n# %-20s : %g \n#\n# Collective test concluded: %s\n",
                         "Out of bounds values", wrong, wrong ? "FAILED" : "OK",
                         "Avg bus bandwidth", AverageBusBandwidth(rows), kProgram);
}

std::string SweepCsvHeader() {
  return "size_bytes,count,type,wire,"
         "oop_time_us,oop_algbw_gbps,oop_busbw_gbps,oop_wrong,oop_rounded,"
         "ip_time_us,ip_algbw_gbps,ip_busbw_gbps,ip_wrong,ip_rounded,"
         "sol_us,sol_busbw_gbps,pct_sol,backend,ranks,pieces,gpus,graph\n";
}

std::string SweepCsvRow(const SweepContext& c, const SweepRow& r) {
  const auto mode = [](const SweepTiming& t) {
    return absl::StrFormat("%.9g,%.9g,%.9g,%s,%s", t.time_us, t.algbw_gbps, t.busbw_gbps,
                           CountText(t.wrong, ""), CountText(t.rounded, ""));
  };
  return absl::StrFormat("%d,%d,%s,%s,%s,%s,%.9g,%.9g,%.9g,%s,%d,%d,%d,%d\n", r.bytes, r.count,
                         DTypeName(r.dtype), WireModeName(r.wire), mode(r.out_of_place),
                         mode(r.in_place), r.sol_us, r.sol_busbw_gbps, r.pct_sol, c.backend,
                         c.ranks, c.options.pieces, c.gpus, c.options.graph ? 1 : 0);
}

std::string SweepCsv(const SweepContext& c, absl::Span<const SweepRow> rows) {
  std::string csv = SweepCsvHeader();
  for (const SweepRow& r : rows) csv += SweepCsvRow(c, r);
  return csv;
}

std::string SweepJson(const SweepContext& c, absl::Span<const SweepRow> rows) {
  const SweepOptions& o = c.options;
  std::string j = absl::StrFormat(
      "{\n  \"schema\": \"dmalab.sweep\",\n  \"schema_version\": %d,\n  \"tool\": \"dmalab\",\n"
      "  \"tool_version\": %s,\n  \"scheduling_seed\": %s,\n  \"min_bytes\": %d,\n"
      "  \"max_bytes\": %d,\n  \"factor\": %d,\n"
      "  \"command\": \"sweep\",\n  \"collective\": %s,\n  \"backend\": %s,\n  \"device\": %s,\n  "
      "\"topology\": %s,\n"
      "  \"ranks\": %d,\n  \"dtype\": %s,\n  \"wire\": %s,\n  \"pieces\": %d,\n  \"iters\": %d,\n"
      "  \"warmup\": %d,\n  \"check\": %s,\n  \"graph\": %s,\n  \"rows\": [",
      kJsonSchemaVersion, JsonString(ToolVersion()),
      c.seed ? absl::StrFormat("%d", *c.seed) : std::string("null"), o.min_bytes, o.max_bytes,
      o.factor, JsonString(o.collective), JsonString(c.backend), JsonString(c.device),
      JsonString(c.topology), c.ranks, JsonString(DTypeName(o.dtype)),
      JsonString(WireModeName(o.wire)), o.pieces, o.iters, o.warmup, o.check ? "true" : "false",
      o.graph ? "true" : "false");
  for (size_t i = 0; i < rows.size(); ++i) {
    const SweepRow& r = rows[i];
    j += absl::StrFormat(
        "%s\n    {\"size_bytes\": %d, \"count\": %d, \"out_of_place\": %s, \"in_place\": %s, "
        "\"sol_us\": %s, \"sol_busbw_gbps\": %s, \"pct_sol\": %s}",
        i ? "," : "", r.bytes, r.count, JsonTiming(r.out_of_place), JsonTiming(r.in_place),
        JsonFigure(r.sol_us), JsonFigure(r.sol_busbw_gbps), JsonFigure(r.pct_sol));
  }
  return j + "\n  ]\n}\n";
}

namespace {

// nccl-tests writes doubles with %lf; a figure that is not finite is null (JSON has no inf or
// nan), as in JsonFigure.
std::string NcclDouble(double v) { return std::isfinite(v) ? absl::StrFormat("%f", v) : "null"; }

std::string NcclTiming(const SweepTiming& t) {
  return absl::StrFormat("{\"time\":%s,\"alg_bw\":%s,\"bus_bw\":%s,\"nwrong\":%s}",
                         NcclDouble(t.time_us), NcclDouble(t.algbw_gbps), NcclDouble(t.busbw_gbps),
                         t.wrong ? NcclDouble(static_cast<double>(*t.wrong)) : "null");
}

std::string StringList(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i)
    absl::StrAppend(&out, i ? "," : "", JsonString(items[i]));
  return out + "]";
}

}  // namespace

std::string SweepNcclJson(const SweepContext& c, absl::Span<const SweepRow> rows) {
  const SweepOptions& o = c.options;
  std::string j = absl::StrFormat(
      "{\"version\":2,\"start_time\":%s,\"args\":%s,\"env\":[],\"nccl_version\":0,"
      "\"config\":{\"nthreads\":1,\"ngpus\":%d,\"minimum_bytes\":%d,\"maximum_bytes\":%d,"
      "\"step_factor\":%d,\"warmup_iters\":%d,\"iterations\":%d,\"aggregated_iterations\":1,"
      "\"validation\":%d,\"graph\":%d,\"blocking_collectives\":\"false\","
      "\"per_iter_timing\":\"false\",\"parallel_init\":\"false\",\"devices\":[",
      JsonString(c.start_time), StringList(c.args), c.ranks, o.min_bytes, o.max_bytes, o.factor,
      o.warmup, o.iters, o.check ? 1 : 0, o.graph ? 1 : 0);
  for (size_t i = 0; i < c.devices.size(); ++i) {
    const SweepRankDevice& d = c.devices[i];
    j += absl::StrFormat(
        "%s{\"rank\":%d,\"group\":0,\"pid\":%d,\"hostname\":%s,\"device\":%d,\"device_hex\":%s,"
        "\"device_info\":%s}",
        i ? "," : "", d.rank, d.pid, JsonString(d.host), d.device, JsonString(d.bus_id),
        JsonString(d.info));
  }
  j += absl::StrFormat(
      "]},\"dmalab\":{\"backend\":%s,\"device\":%s,\"topology\":%s,\"ranks\":%d,\"gpus\":%d,"
      "\"dtype\":%s,\"wire\":%s,\"pieces\":%d},\"results\":[",
      JsonString(c.backend), JsonString(c.device), JsonString(c.topology), c.ranks, c.gpus,
      JsonString(DTypeName(o.dtype)), JsonString(WireModeName(o.wire)), o.pieces);
  for (size_t i = 0; i < rows.size(); ++i) {
    const SweepRow& r = rows[i];
    j += absl::StrFormat(
        "%s{\"size\":%d,\"count\":%d,\"type\":%s,\"redop\":\"sum\",\"root\":\"%6d\","
        "\"out_of_place\":%s,\"in_place\":%s,\"actual_iterations\":%d,\"experiment_name\":\"\","
        "\"dmalab\":{\"wire\":%s,\"out_of_place_rounded\":%s,\"in_place_rounded\":%s,"
        "\"sol_us\":%s,\"sol_bus_bw\":%s,\"pct_sol\":%s}}",
        i ? "," : "", r.bytes, r.count, JsonString(NcclTypeName(r.dtype)), -1,
        NcclTiming(r.out_of_place), NcclTiming(r.in_place), o.iters,
        JsonString(WireModeName(r.wire)), CountText(r.out_of_place.rounded, "null"),
        CountText(r.in_place.rounded, "null"), NcclDouble(r.sol_us), NcclDouble(r.sol_busbw_gbps),
        NcclDouble(r.pct_sol));
  }
  const int64_t wrong = WrongTotal(rows);
  j += absl::StrFormat(
      "],\"out_of_bounds\":{\"count\":%d,\"okay\":\"%s\"},\"average_bus_bandwidth\":{"
      "\"bandwidth\":%s,\"okay\":\"unchecked\"},\"errors\":[],\"end_time\":%s}\n",
      wrong, wrong ? "false" : "true", NcclDouble(AverageBusBandwidth(rows)),
      JsonString(c.end_time));
  return j;
}

}  // namespace dmalab

#include "measure/sweep_report.h"

#include <optional>

#include "absl/strings/str_format.h"
#include "common/core/version.h"

namespace dmalab {
namespace {

std::string CountText(const std::optional<int64_t>& n, std::string_view unset) {
  return n ? absl::StrFormat("%d", *n) : std::string(unset);
}

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", static_cast<int>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string JsonTiming(const SweepTiming& t) {
  return absl::StrFormat(
      "{\"time_us\": %.9g, \"algbw_gbps\": %.9g, \"busbw_gbps\": %.9g, \"wrong\": %s, "
      "\"rounded\": %s}",
      t.time_us, t.algbw_gbps, t.busbw_gbps, CountText(t.wrong, "null"),
      CountText(t.rounded, "null"));
}

}  // namespace

std::string SweepTableHeader(const SweepContext& c) {
  const SweepOptions& o = c.options;
  std::string h = absl::StrFormat(
      "# dmalab sweep: backend %s (device %s%s), %d ranks, %s, wire %s, pieces %d\n"
      "# -n %d -w %d -c %d -G %d; %s\n",
      c.backend, c.device, c.topology.empty() ? "" : ", topology " + c.topology, c.ranks,
      DTypeName(o.dtype), WireModeName(o.wire), o.pieces, o.iters, o.warmup, o.check ? 1 : 0,
      o.graph ? 1 : 0,
      c.backend == "sim" ? "times are the timing model's prediction (SimDevice::now_us)"
                         : "times are host wall clock around n calls between two synchronizes");
  if (o.check) {
    h += o.wire == WireMode::kNative
             ? "# #wrong: elements (all ranks) that differ from the exact sum of the integer "
               "inputs\n"
             : "# compressed wire: #wrong counts elements of ranks 1..W-1 that differ from rank "
               "0's;\n# #round counts elements (all ranks) that differ from the exact sum: the "
               "wire's rounding\n";
  }
  h +=
      "# sol: bare copies of the ring's bytes at its hop pattern; %sol = sol / out-of-place time\n";
  h += absl::StrFormat("#%11s %11s %5s %9s  %10s %8s %8s %7s %9s  %10s %8s %8s %7s %9s  %10s %6s\n",
                       "", "", "", "", "out-of-place", "", "", "", "", "in-place", "", "", "", "",
                       "", "");
  h += absl::StrFormat("#%11s %11s %5s %9s  %10s %8s %8s %7s %9s  %10s %8s %8s %7s %9s  %10s %6s\n",
                       "size", "count", "type", "wire", "time", "algbw", "busbw", "#wrong",
                       "#round", "time", "algbw", "busbw", "#wrong", "#round", "sol", "%sol");
  h += absl::StrFormat("#%11s %11s %5s %9s  %10s %8s %8s %7s %9s  %10s %8s %8s %7s %9s  %10s %6s\n",
                       "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "", "", "(us)",
                       "(GB/s)", "(GB/s)", "", "", "(us)", "");
  return h;
}

std::string SweepTableRow(const SweepRow& r) {
  const auto mode = [](const SweepTiming& t) {
    return absl::StrFormat("%10.2f %8.2f %8.2f %7s %9s", t.time_us, t.algbw_gbps, t.busbw_gbps,
                           CountText(t.wrong, "N/A"), CountText(t.rounded, "-"));
  };
  return absl::StrFormat(" %11d %11d %5s %9s  %s  %s  %10.2f %6.1f\n", r.bytes, r.count,
                         DTypeName(r.dtype), WireModeName(r.wire), mode(r.out_of_place),
                         mode(r.in_place), r.sol_us, r.pct_sol);
}

std::string SweepCsvHeader() {
  return "size_bytes,count,type,wire,"
         "oop_time_us,oop_algbw_gbps,oop_busbw_gbps,oop_wrong,oop_rounded,"
         "ip_time_us,ip_algbw_gbps,ip_busbw_gbps,ip_wrong,ip_rounded,"
         "sol_us,sol_busbw_gbps,pct_sol,backend,ranks,pieces\n";
}

std::string SweepCsvRow(const SweepContext& c, const SweepRow& r) {
  const auto mode = [](const SweepTiming& t) {
    return absl::StrFormat("%.9g,%.9g,%.9g,%s,%s", t.time_us, t.algbw_gbps, t.busbw_gbps,
                           CountText(t.wrong, ""), CountText(t.rounded, ""));
  };
  return absl::StrFormat("%d,%d,%s,%s,%s,%s,%.9g,%.9g,%.9g,%s,%d,%d\n", r.bytes, r.count,
                         DTypeName(r.dtype), WireModeName(r.wire), mode(r.out_of_place),
                         mode(r.in_place), r.sol_us, r.sol_busbw_gbps, r.pct_sol, c.backend,
                         c.ranks, c.options.pieces);
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
      "  \"command\": \"sweep\",\n  \"backend\": %s,\n  \"device\": %s,\n  \"topology\": %s,\n"
      "  \"ranks\": %d,\n  \"dtype\": %s,\n  \"wire\": %s,\n  \"pieces\": %d,\n  \"iters\": %d,\n"
      "  \"warmup\": %d,\n  \"check\": %s,\n  \"graph\": %s,\n  \"rows\": [",
      kJsonSchemaVersion, JsonString(ToolVersion()),
      c.seed ? absl::StrFormat("%d", *c.seed) : std::string("null"), o.min_bytes, o.max_bytes,
      o.factor, JsonString(c.backend), JsonString(c.device), JsonString(c.topology), c.ranks,
      JsonString(DTypeName(o.dtype)), JsonString(WireModeName(o.wire)), o.pieces, o.iters, o.warmup,
      o.check ? "true" : "false", o.graph ? "true" : "false");
  for (size_t i = 0; i < rows.size(); ++i) {
    const SweepRow& r = rows[i];
    j += absl::StrFormat(
        "%s\n    {\"size_bytes\": %d, \"count\": %d, \"out_of_place\": %s, \"in_place\": %s, "
        "\"sol_us\": %.9g, \"sol_busbw_gbps\": %.9g, \"pct_sol\": %.9g}",
        i ? "," : "", r.bytes, r.count, JsonTiming(r.out_of_place), JsonTiming(r.in_place),
        r.sol_us, r.sol_busbw_gbps, r.pct_sol);
  }
  return j + "\n  ]\n}\n";
}

}  // namespace dmalab

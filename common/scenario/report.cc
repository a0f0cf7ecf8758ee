#include "dmalab/report.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/core/hash.h"
#include "common/core/json_writer.h"
#include "common/core/text_escape.h"
#include "common/core/version.h"

namespace dmalab {

const char* BoolText(bool b) { return b ? "true" : "false"; }

std::string WithThousands(int64_t value) {
  const std::string digits = absl::StrFormat("%d", value);
  const size_t sign = value < 0 ? 1 : 0;
  std::string out = digits.substr(0, sign);
  const size_t n = digits.size() - sign;
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && (n - i) % 3 == 0) out += ',';
    out += digits[sign + i];
  }
  return out;
}

std::string FormatStorage(const MemRef& mem) {
  return absl::StrFormat("rank %d [0x%x, 0x%x) alloc %d", mem.rank, mem.addr, mem.end(),
                         mem.alloc_id);
}

// The output hash: of bytes, or (shadow fidelity) of provenance.
std::string OutputHash(const ReplayReport& r, uint64_t hash) {
  return r.fidelity == "values" ? HashString(hash) : absl::StrFormat("provenance:%016x", hash);
}

std::string SummaryLine(const ReplayReport& r) {
  return absl::StrFormat(
      "pointer_alias=%s  retained_mismatches=%s / %s  rank_consistent=%s  status=%s",
      BoolText(r.pointer_alias), WithThousands(r.retained_mismatches),
      WithThousands(r.retained_elems), BoolText(r.rank_consistent), r.pass() ? "PASS" : "FAIL");
}

std::string FormatRanges(const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  std::vector<std::string> parts;
  for (auto [a, b] : ranges) {
    parts.push_back(a == b ? absl::StrFormat("%d", a) : absl::StrFormat("%d-%d", a, b));
  }
  return absl::StrJoin(parts, ",");
}

std::string FormatRanks(const std::vector<int>& ranks) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int r : ranks) {
    if (!ranges.empty() && ranges.back().second + 1 == r) {
      ranges.back().second = r;
    } else {
      ranges.emplace_back(r, r);
    }
  }
  return absl::StrFormat("%s %s", ranks.size() == 1 ? "rank" : "ranks", FormatRanges(ranges));
}

// Step descriptions, names and details come from the scenario file: escaped, as everywhere in
// the report.
std::string FormatFindingGroup(const FindingGroup& g) {
  const ReplayFinding& f = g.first;
  std::string where;
  if (f.step_index == 0) {
    where = EscapeText(f.step_desc);
  } else if (f.iterations > 0) {
    where = absl::StrFormat(
        "step %d %s, %s %s of %d", f.step_index, EscapeText(f.step_desc),
        g.iteration_ranges.size() == 1 &&
                g.iteration_ranges[0].first == g.iteration_ranges[0].second
            ? "iteration"
            : "iterations",
        FormatRanges(g.iteration_ranges) + (g.iteration_ranges_truncated ? ",..." : ""),
        f.iterations);
  } else {
    where = absl::StrFormat("step %d %s", f.step_index, EscapeText(f.step_desc));
  }
  std::string line =
      absl::StrFormat("FINDING %s: %s, %s", EscapeText(f.checker), where, FormatRanks(g.ranks));
  if (g.count > 1)
    absl::StrAppendFormat(&line, " (%s findings, first shown)", WithThousands(g.count));
  absl::StrAppendFormat(&line, ": %s", EscapeText(f.detail));
  if (!f.storage.empty()) {
    std::vector<std::string> storage;
    for (const StorageRef& s : f.storage) {
      storage.push_back(absl::StrFormat("'%s' %s", EscapeText(s.tensor), FormatStorage(s.mem)));
    }
    absl::StrAppendFormat(&line, "; storage: %s", absl::StrJoin(storage, "; "));
  }
  return line;
}

std::string ErrorSummaryLine(const ReplayReport& r) {
  const int64_t distinct = static_cast<int64_t>(r.groups.size()) + r.groups_not_kept;
  std::string line = absl::StrFormat("ERROR SUMMARY: %s finding%s", WithThousands(r.findings_total),
                                     r.findings_total == 1 ? "" : "s");
  if (r.findings_total > 0) {
    absl::StrAppendFormat(&line, " (%s distinct)", WithThousands(distinct));
  }
  if (r.groups_not_kept > 0) {
    absl::StrAppendFormat(&line, "; %s distinct findings not listed (the first %d are)",
                          WithThousands(r.groups_not_kept), ReplayReport::kMaxGroups);
  }
  if (r.device_findings_not_kept > 0) {
    absl::StrAppendFormat(&line,
                          "; %s device findings counted but not kept by the device (not listed)",
                          WithThousands(r.device_findings_not_kept));
  }
  return line;
}

std::string FormatReportText(const ReplayReport& r) {
  std::string out;
  // Names, labels and paths come from the scenario file: escaped (common/core/text_escape.h), so
  // that no line of the report can be forged by what a file holds.
  const auto esc = [](std::string_view text) { return EscapeText(text); };
  absl::StrAppendFormat(&out, "scenario %s (%s)\n", esc(r.scenario), esc(r.file));
  absl::StrAppendFormat(
      &out, "collective=%s device=%s fidelity=%s world=%d wire=%s faults=%s seed=%d steps=%d%s%s\n",
      r.collective.empty() ? "none" : esc(r.collective), r.device, r.fidelity, r.world, r.wire,
      r.faults, r.seed, r.steps_executed,
      r.scheduling_seed ? absl::StrFormat(" scheduling_seed=%d", *r.scheduling_seed) : "",
      r.perturb_seed ? absl::StrFormat(" perturb_seed=%d", *r.perturb_seed) : "");
  for (const AllReduceRecord& a : r.all_reduces) {
    absl::StrAppendFormat(&out, "step %d %s: %s -> %s (%s) %s elems %s bytes hash=%s%s\n",
                          a.step_index, esc(a.step), esc(a.input), esc(a.output),
                          AllReduceFormName(a.form), WithThousands(a.elems),
                          WithThousands(static_cast<int64_t>(a.bytes)), OutputHash(r, a.hash),
                          a.rank_consistent ? "" : " RANKS DIFFER");
  }
  for (const FindingGroup& g : r.groups) out += FormatFindingGroup(g) + "\n";
  out += ErrorSummaryLine(r) + "\n";
  if (r.all_reduces_total > static_cast<int64_t>(r.all_reduces.size())) {
    absl::StrAppendFormat(
        &out, "... and %s more all-reduces\n",
        WithThousands(r.all_reduces_total - static_cast<int64_t>(r.all_reduces.size())));
  }
  absl::StrAppendFormat(&out, "retained_mismatches counts rank %d's copy of each retained tensor",
                        r.retained_rank);
  bool ranks_differ = false;
  for (int64_t n : r.retained_mismatches_by_rank) {
    ranks_differ |= n != r.retained_mismatches;
  }
  if (ranks_differ) {
    std::vector<std::string> by_rank;
    for (size_t i = 0; i < r.retained_mismatches_by_rank.size(); ++i) {
      by_rank.push_back(
          absl::StrFormat("rank %d=%s", i, WithThousands(r.retained_mismatches_by_rank[i])));
    }
    absl::StrAppendFormat(&out, "; ranks differ: %s", absl::StrJoin(by_rank, ", "));
  }
  out += "\n";
  out += SummaryLine(r);
  out += "\n";
  return out;
}

void WriteJsonPreamble(JsonWriter& w, std::string_view command) {
  w.Key("schema").String("dmalab." + std::string(command));
  w.Key("schema_version").Int(kJsonSchemaVersion);
  w.Key("tool").String("dmalab").Key("tool_version").String(ToolVersion());
  w.Key("command").String(command);
}

namespace {

void WriteFindingJson(JsonWriter& w, const ReplayFinding& f) {
  w.BeginObject();
  w.Key("kind").String(ReplayFindingKindName(f.kind)).Key("checker").String(f.checker);
  w.Key("step_index").Int(f.step_index).Key("step").String(f.step);
  w.Key("step_id").String(f.step_id);
  w.Key("iteration").Int(f.iteration).Key("iterations").Int(f.iterations);
  w.Key("rank").Int(f.rank);
  w.Key("storage").BeginArray();
  for (const StorageRef& s : f.storage) {
    w.BeginObject().Key("tensor").String(s.tensor).Key("rank").Int(s.mem.rank);
    w.Key("addr").String(absl::StrFormat("0x%x", s.mem.addr)).Key("bytes").UInt(s.mem.bytes);
    w.Key("alloc_id").UInt(s.mem.alloc_id).EndObject();
  }
  w.EndArray();
  w.Key("ops").BeginArray();
  for (const FindingOp& op : f.ops) {
    w.BeginObject().Key("rank").Int(op.rank).Key("stream").String(op.stream);
    w.Key("label").String(op.label).Key("access").String(op.access).EndObject();
  }
  w.EndArray();
  w.Key("elems").Int(f.elems).Key("of_elems").Int(f.of_elems).Key("detail").String(f.detail);
  w.EndObject();
}

}  // namespace

std::string FormatReportJson(const ReplayReport& r) {
  JsonWriter w;
  w.BeginObject();
  WriteJsonPreamble(w, "replay");
  w.Key("collective").String(r.collective);
  w.Key("scenario").String(r.scenario).Key("file").String(r.file).Key("device").String(r.device);
  w.Key("fidelity").String(r.fidelity);
  w.Key("world").Int(r.world).Key("wire").String(r.wire).Key("faults").String(r.faults);
  w.Key("seed").UInt(r.seed);
  w.Key("scheduling_seed").OptionalUInt(r.scheduling_seed);
  w.Key("perturb_seed").OptionalUInt(r.perturb_seed);
  w.Key("steps_executed").Int(r.steps_executed);
  w.Key("all_reduces").BeginArray();
  for (const AllReduceRecord& a : r.all_reduces) {
    w.BeginObject();
    w.Key("step_index").Int(a.step_index).Key("step").String(a.step);
    w.Key("input").String(a.input).Key("output").String(a.output);
    w.Key("form").String(AllReduceFormName(a.form));
    w.Key("elems").Int(a.elems).Key("bytes").UInt(a.bytes);
    w.Key("hash").String(OutputHash(r, a.hash)).Key("rank_consistent").Bool(a.rank_consistent);
    w.EndObject();
  }
  w.EndArray();
  w.Key("all_reduces_total").Int(r.all_reduces_total);
  w.Key("findings").BeginArray();
  for (const ReplayFinding& f : r.findings) WriteFindingJson(w, f);
  w.EndArray();
  w.Key("finding_groups").BeginArray();
  for (const FindingGroup& g : r.groups) {
    w.BeginObject();
    w.Key("checker").String(g.first.checker).Key("step_id").String(g.first.step_id);
    w.Key("count").Int(g.count);
    w.Key("ranks").BeginArray();
    for (int rank : g.ranks) w.Int(rank);
    w.EndArray();
    w.Key("iterations").Int(g.first.iterations);
    w.Key("iteration_ranges").BeginArray();
    for (auto [a, b] : g.iteration_ranges) w.BeginArray().Int(a).Int(b).EndArray();
    w.EndArray();
    w.Key("iteration_ranges_truncated").Bool(g.iteration_ranges_truncated);
    w.Key("first");
    WriteFindingJson(w, g.first);
    w.EndObject();
  }
  w.EndArray();
  w.Key("findings_distinct").Int(static_cast<int64_t>(r.groups.size()) + r.groups_not_kept);
  w.Key("device_findings_not_kept").Int(r.device_findings_not_kept);
  w.Key("findings_total").Int(r.findings_total);
  w.Key("summary").BeginObject();
  w.Key("pointer_alias").Bool(r.pointer_alias);
  w.Key("retained_mismatches").Int(r.retained_mismatches);
  w.Key("retained_elems").Int(r.retained_elems);
  w.Key("retained_rank").Int(r.retained_rank);
  w.Key("retained_mismatches_by_rank").BeginArray();
  for (int64_t n : r.retained_mismatches_by_rank) w.Int(n);
  w.EndArray();
  w.Key("rank_consistent").Bool(r.rank_consistent);
  w.Key("status").String(r.pass() ? "PASS" : "FAIL");
  w.EndObject();
  w.EndObject();
  return w.str();
}

}  // namespace dmalab

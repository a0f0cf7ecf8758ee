#include "common/scenario/report.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/core/hash.h"
#include "common/core/json_writer.h"

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

std::string FormatReportText(const ReplayReport& r) {
  std::string out;
  absl::StrAppendFormat(&out, "scenario %s (%s)\n", r.scenario, r.file);
  absl::StrAppendFormat(
      &out, "collective=%s device=%s fidelity=%s world=%d wire=%s faults=%s seed=%d steps=%d\n",
      r.collective.empty() ? "none" : r.collective, r.device, r.fidelity, r.world, r.wire, r.faults,
      r.seed, r.steps_executed);
  for (const AllReduceRecord& a : r.all_reduces) {
    absl::StrAppendFormat(&out, "step %d %s: %s -> %s (%s) %s elems %s bytes hash=%s%s\n",
                          a.step_index, a.step, a.input, a.output, AllReduceFormName(a.form),
                          WithThousands(a.elems), WithThousands(static_cast<int64_t>(a.bytes)),
                          OutputHash(r, a.hash), a.rank_consistent ? "" : " RANKS DIFFER");
  }
  for (const ReplayFinding& f : r.findings) {
    std::vector<std::string> storage;
    for (const StorageRef& s : f.storage) {
      storage.push_back(absl::StrFormat("'%s' %s", s.tensor, FormatStorage(s.mem)));
    }
    const std::string where =
        f.step_index > 0 ? absl::StrFormat("step %d %s", f.step_index, f.step) : f.step;
    absl::StrAppendFormat(&out, "FINDING %s: %s, rank %d: %s; storage: %s\n",
                          ReplayFindingKindName(f.kind), where, f.rank, f.detail,
                          absl::StrJoin(storage, "; "));
  }
  if (r.findings_total > static_cast<int64_t>(r.findings.size())) {
    absl::StrAppendFormat(
        &out, "... and %s more findings\n",
        WithThousands(r.findings_total - static_cast<int64_t>(r.findings.size())));
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

std::string FormatReportJson(const ReplayReport& r) {
  JsonWriter w;
  w.BeginObject();
  w.Key("scenario").String(r.scenario).Key("file").String(r.file).Key("device").String(r.device);
  w.Key("fidelity").String(r.fidelity);
  w.Key("world").Int(r.world).Key("wire").String(r.wire).Key("faults").String(r.faults);
  w.Key("seed").UInt(r.seed).Key("steps_executed").Int(r.steps_executed);
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
  w.Key("findings").BeginArray();
  for (const ReplayFinding& f : r.findings) {
    w.BeginObject();
    w.Key("kind").String(ReplayFindingKindName(f.kind)).Key("step_index").Int(f.step_index);
    w.Key("step").String(f.step).Key("rank").Int(f.rank);
    w.Key("storage").BeginArray();
    for (const StorageRef& s : f.storage) {
      w.BeginObject().Key("tensor").String(s.tensor).Key("rank").Int(s.mem.rank);
      w.Key("addr").String(absl::StrFormat("0x%x", s.mem.addr)).Key("bytes").UInt(s.mem.bytes);
      w.Key("alloc_id").UInt(s.mem.alloc_id).EndObject();
    }
    w.EndArray();
    w.Key("elems").Int(f.elems).Key("of_elems").Int(f.of_elems).Key("detail").String(f.detail);
    w.EndObject();
  }
  w.EndArray();
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

#include "runner/report_stream.h"

#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/core/byte_codec.h"

namespace dmalab {
namespace {

constexpr uint64_t kFindingKinds = static_cast<uint64_t>(ReplayFindingKind::kCollectiveHang) + 1;
constexpr uint64_t kForms = static_cast<uint64_t>(AllReduceForm::kInPlace) + 1;

void PutMem(ByteWriter& o, const MemRef& m) {
  o.I64(m.rank).U64(m.addr).U64(m.bytes).U64(m.alloc_id);
}
MemRef GetMem(ByteReader& in) {
  MemRef m;
  m.rank = static_cast<int>(in.I64());
  m.addr = in.U64();
  m.bytes = in.U64();
  m.alloc_id = in.U64();
  return m;
}

void PutFinding(ByteWriter& o, const ReplayFinding& f) {
  o.U64(static_cast<uint64_t>(f.kind)).Str(f.checker).I64(f.step_index).Str(f.step);
  o.Str(f.step_desc).Str(f.step_id).I64(f.iteration).I64(f.iterations).I64(f.rank);
  o.U64(f.storage.size());
  for (const StorageRef& s : f.storage) {
    o.Str(s.tensor);
    PutMem(o, s.mem);
  }
  o.U64(f.ops.size());
  for (const FindingOp& op : f.ops) o.I64(op.rank).Str(op.stream).Str(op.label).Str(op.access);
  o.I64(f.elems).I64(f.of_elems).Str(f.detail).Str(f.signature);
}
ReplayFinding GetFinding(ByteReader& in) {
  ReplayFinding f;
  f.kind = static_cast<ReplayFindingKind>(in.Below(kFindingKinds, "a finding kind"));
  f.checker = in.Str();
  f.step_index = in.I64();
  f.step = in.Str();
  f.step_desc = in.Str();
  f.step_id = in.Str();
  f.iteration = in.I64();
  f.iterations = in.I64();
  f.rank = static_cast<int>(in.I64());
  for (uint64_t n = in.Count(40), i = 0; i < n; ++i) {
    StorageRef s;
    s.tensor = in.Str();
    s.mem = GetMem(in);
    f.storage.push_back(std::move(s));
  }
  for (uint64_t n = in.Count(32), i = 0; i < n; ++i) {
    FindingOp op;
    op.rank = static_cast<int>(in.I64());
    op.stream = in.Str();
    op.label = in.Str();
    op.access = in.Str();
    f.ops.push_back(std::move(op));
  }
  f.elems = in.I64();
  f.of_elems = in.I64();
  f.detail = in.Str();
  f.signature = in.Str();
  return f;
}

void PutGroup(ByteWriter& o, const FindingGroup& g) {
  PutFinding(o, g.first);
  o.I64(g.count).U64(g.ranks.size());
  for (int r : g.ranks) o.I64(r);
  o.U64(g.iteration_ranges.size());
  for (const auto& [a, b] : g.iteration_ranges) o.I64(a).I64(b);
  o.Bool(g.iteration_ranges_truncated);
}
FindingGroup GetGroup(ByteReader& in) {
  FindingGroup g;
  g.first = GetFinding(in);
  g.count = in.I64();
  for (uint64_t n = in.Count(8), i = 0; i < n; ++i) g.ranks.push_back(static_cast<int>(in.I64()));
  for (uint64_t n = in.Count(16), i = 0; i < n; ++i) {
    const int64_t a = in.I64();
    g.iteration_ranges.emplace_back(a, in.I64());
  }
  g.iteration_ranges_truncated = in.Bool();
  return g;
}

void PutRecord(ByteWriter& o, const AllReduceRecord& r) {
  o.I64(r.step_index).Str(r.step).Str(r.input).Str(r.output).U64(static_cast<uint64_t>(r.form));
  o.I64(r.elems).U64(r.bytes).U64(r.hash).Bool(r.rank_consistent);
}
AllReduceRecord GetRecord(ByteReader& in) {
  AllReduceRecord r;
  r.step_index = in.I64();
  r.step = in.Str();
  r.input = in.Str();
  r.output = in.Str();
  r.form = static_cast<AllReduceForm>(in.Below(kForms, "an all-reduce form"));
  r.elems = in.I64();
  r.bytes = in.U64();
  r.hash = in.U64();
  r.rank_consistent = in.Bool();
  return r;
}

std::string Header(const ReplayReport& r) {
  ByteWriter o;
  o.Str(r.scenario).Str(r.file).Str(r.device).Str(r.collective).Str(r.fidelity).I64(r.world);
  o.Str(r.wire).Str(r.faults).U64(r.seed).Bool(r.scheduling_seed.has_value());
  o.U64(r.scheduling_seed.value_or(0));
  return o.Take();
}
void GetHeader(ByteReader& in, ReplayReport& r) {
  r.scenario = in.Str();
  r.file = in.Str();
  r.device = in.Str();
  r.collective = in.Str();
  r.fidelity = in.Str();
  r.world = static_cast<int>(in.I64());
  r.wire = in.Str();
  r.faults = in.Str();
  r.seed = in.U64();
  const bool has_seed = in.Bool();
  const uint64_t seed = in.U64();
  r.scheduling_seed = has_seed ? std::optional<uint64_t>(seed) : std::nullopt;
}

}  // namespace

std::string ReportDeltaWriter::Encode(const ReplayStepPlace& next, const ReplayReport& r) {
  ByteWriter o;
  std::string header = Header(r);
  o.Bool(header != header_sent_);
  if (header != header_sent_) o.Str(header);
  header_sent_ = std::move(header);
  o.I64(r.steps_executed).I64(r.all_reduces_total).I64(r.findings_total).I64(r.groups_not_kept);
  o.I64(r.device_findings_not_kept).Bool(r.pointer_alias).I64(r.retained_rank);
  o.I64(r.retained_mismatches).I64(r.retained_elems).Bool(r.rank_consistent);
  o.U64(r.retained_mismatches_by_rank.size());
  for (int64_t v : r.retained_mismatches_by_rank) o.I64(v);
  o.U64(records_sent_).U64(r.all_reduces.size() - records_sent_);
  for (size_t i = records_sent_; i < r.all_reduces.size(); ++i) PutRecord(o, r.all_reduces[i]);
  records_sent_ = r.all_reduces.size();
  o.U64(findings_sent_).U64(r.findings.size() - findings_sent_);
  for (size_t i = findings_sent_; i < r.findings.size(); ++i) PutFinding(o, r.findings[i]);
  findings_sent_ = r.findings.size();
  // A group changes only by counting one more finding: its count says whether to send it.
  group_counts_sent_.resize(r.groups.size(), 0);
  std::vector<size_t> changed;
  for (size_t i = 0; i < r.groups.size(); ++i) {
    if (r.groups[i].count != group_counts_sent_[i]) changed.push_back(i);
  }
  o.U64(r.groups.size()).U64(changed.size());
  for (size_t i : changed) {
    o.U64(i);
    PutGroup(o, r.groups[i]);
    group_counts_sent_[i] = r.groups[i].count;
  }
  o.I64(next.step_index).Str(next.step).Str(next.step_desc).Str(next.step_id);
  o.I64(next.iteration).I64(next.iterations);
  return o.Take();
}

absl::Status ReportDeltaReader::Apply(std::string_view message) {
  ByteReader in(message);
  // Everything is read and checked first; the report changes only when the whole message is good.
  ReplayReport scalars;
  const bool has_header = in.Bool();
  if (has_header) {
    const std::string header = in.Str();
    ByteReader h(header);
    GetHeader(h, scalars);
    if (!h.error().empty() || !h.at_end()) in.Fail("a malformed header");
  }
  scalars.steps_executed = in.I64();
  scalars.all_reduces_total = in.I64();
  scalars.findings_total = in.I64();
  scalars.groups_not_kept = in.I64();
  scalars.device_findings_not_kept = in.I64();
  scalars.pointer_alias = in.Bool();
  scalars.retained_rank = static_cast<int>(in.I64());
  scalars.retained_mismatches = in.I64();
  scalars.retained_elems = in.I64();
  scalars.rank_consistent = in.Bool();
  for (uint64_t n = in.Count(8), i = 0; i < n; ++i) {
    scalars.retained_mismatches_by_rank.push_back(in.I64());
  }
  if (in.U64() != report_.all_reduces.size()) in.Fail("records out of order");
  std::vector<AllReduceRecord> records;
  for (uint64_t n = in.Count(72), i = 0; i < n; ++i) records.push_back(GetRecord(in));
  if (in.U64() != report_.findings.size()) in.Fail("findings out of order");
  std::vector<ReplayFinding> findings;
  for (uint64_t n = in.Count(120), i = 0; i < n; ++i) findings.push_back(GetFinding(in));
  if (report_.all_reduces.size() + records.size() > static_cast<uint64_t>(max_records_) ||
      report_.findings.size() + findings.size() > static_cast<uint64_t>(max_findings_)) {
    in.Fail("more records or findings than a report keeps");
  }
  const uint64_t groups = in.U64();
  if (groups < report_.groups.size() || groups > ReplayReport::kMaxGroups) {
    in.Fail(absl::StrFormat("%d finding groups after %d", groups, report_.groups.size()));
  }
  std::vector<std::pair<uint64_t, FindingGroup>> changed;
  for (uint64_t n = in.Count(152), i = 0; i < n; ++i) {
    const uint64_t index = in.Below(groups, "a finding group's index");
    changed.emplace_back(index, GetGroup(in));
  }
  ReplayStepPlace next;
  next.step_index = in.I64();
  next.step = in.Str();
  next.step_desc = in.Str();
  next.step_id = in.Str();
  next.iteration = in.I64();
  next.iterations = in.I64();
  if (in.error().empty() && !in.at_end()) in.Fail("bytes after the message");
  if (!in.error().empty()) {
    return absl::DataLossError(absl::StrFormat("a malformed report message: %s", in.error()));
  }

  if (has_header) {
    report_.scenario = std::move(scalars.scenario);
    report_.file = std::move(scalars.file);
    report_.device = std::move(scalars.device);
    report_.collective = std::move(scalars.collective);
    report_.fidelity = std::move(scalars.fidelity);
    report_.world = scalars.world;
    report_.wire = std::move(scalars.wire);
    report_.faults = std::move(scalars.faults);
    report_.seed = scalars.seed;
    report_.scheduling_seed = scalars.scheduling_seed;
  }
  report_.steps_executed = scalars.steps_executed;
  report_.all_reduces_total = scalars.all_reduces_total;
  report_.findings_total = scalars.findings_total;
  report_.groups_not_kept = scalars.groups_not_kept;
  report_.device_findings_not_kept = scalars.device_findings_not_kept;
  report_.pointer_alias = scalars.pointer_alias;
  report_.retained_rank = scalars.retained_rank;
  report_.retained_mismatches = scalars.retained_mismatches;
  report_.retained_elems = scalars.retained_elems;
  report_.rank_consistent = scalars.rank_consistent;
  report_.retained_mismatches_by_rank = std::move(scalars.retained_mismatches_by_rank);
  for (AllReduceRecord& r : records) report_.all_reduces.push_back(std::move(r));
  for (ReplayFinding& f : findings) report_.findings.push_back(std::move(f));
  report_.groups.resize(groups);
  for (auto& [index, g] : changed) report_.groups[index] = std::move(g);
  place_ = std::move(next);
  started_ = true;
  return absl::OkStatus();
}

}  // namespace dmalab

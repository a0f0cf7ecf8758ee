#include "common/ring/ring_plan.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/core/enum_table.h"

namespace dmalab {
namespace {

constexpr auto kOpKinds = MakeEnumTable<OpKind>({{OpKind::kRecord, "record"},
                                                 {OpKind::kWaitEvent, "wait-event"},
                                                 {OpKind::kCopy, "copy"},
                                                 {OpKind::kReduce, "reduce"},
                                                 {OpKind::kSignal, "signal"},
                                                 {OpKind::kWaitFlag, "wait-flag"}});

constexpr auto kPlanStreams = MakeEnumTable<PlanStream>({{PlanStream::kCompute, "compute"},
                                                         {PlanStream::kSend, "send"},
                                                         {PlanStream::kPlace, "place"},
                                                         {PlanStream::kFlag, "flag"}});

constexpr auto kPhases = MakeEnumTable<Phase>({{Phase::kEntry, "entry"},
                                               {Phase::kReduceScatter, "rs"},
                                               {Phase::kAllGather, "ag"},
                                               {Phase::kExit, "exit"}});

std::string_view OpKindName(OpKind k) { return kOpKinds.Name(k); }

std::string SliceString(const Slice& s) {
  std::string where;
  switch (s.region) {
    case Region::kInput:
      where = "in";
      break;
    case Region::kOutput:
      where = "out";
      break;
    case Region::kScratch:
      where = absl::StrCat("scratch", s.slot);
      break;
    case Region::kPeerScratch:
      where = absl::StrCat("r", s.peer, ".scratch", s.slot);
      break;
    case Region::kStaging:
      where = absl::StrCat("staging", s.slot);
      break;
  }
  std::string text = absl::StrFormat("%s[%d+%d]", where, s.offset, s.bytes);
  if (s.codec != Codec::kPlain) absl::StrAppendFormat(&text, ":%s", CodecName(s.codec));
  return text;
}

}  // namespace

std::string_view PlanStreamName(PlanStream s) { return kPlanStreams.Name(s); }

std::string_view PhaseName(Phase p) { return kPhases.Name(p); }

std::string PlanOp::Label() const {
  if (phase == Phase::kEntry || phase == Phase::kExit) {
    return absl::StrFormat("%s %s", PhaseName(phase), OpKindName(kind));
  }
  return absl::StrFormat("%s.k%d.p%d %s", PhaseName(phase), step, piece, OpKindName(kind));
}

std::string RingPlan::ToString() const {
  std::string out = absl::StrFormat(
      "ring plan: world=%d elems=%d dtype=%s wire=%s pieces=%d (requested %d) chunk_elems=%d\n",
      world, elems, DTypeName(dtype), WireLabel(wire, dtype), pieces, pieces_requested,
      chunk_elems);
  absl::StrAppendFormat(&out,
                        "slab per rank: %d flags, %d scratch areas of %d B, %d B in all; "
                        "events per rank: %d\n",
                        slab.num_flags, slab.num_scratch_areas, slab.scratch_area_bytes,
                        slab.slab_bytes, num_events);
  for (size_t r = 0; r < ranks.size(); ++r) {
    absl::StrAppendFormat(&out, "rank %d: %d ops, %d wire bytes sent\n", r, ranks[r].size(),
                          wire_bytes_sent[r]);
    for (const PlanOp& op : ranks[r]) {
      absl::StrAppendFormat(&out, "  %-8s %-22s", PlanStreamName(op.stream), op.Label());
      switch (op.kind) {
        case OpKind::kRecord:
        case OpKind::kWaitEvent:
          absl::StrAppendFormat(&out, " ev%d", op.event);
          break;
        case OpKind::kCopy:
          absl::StrAppendFormat(&out, " %s <- %s", SliceString(op.dst), SliceString(op.terms[0]));
          break;
        case OpKind::kReduce: {
          absl::StrAppendFormat(&out, " %s <-", SliceString(op.dst));
          for (size_t i = 0; i < op.terms.size(); ++i) {
            absl::StrAppendFormat(&out, "%s %s", i ? " +" : "", SliceString(op.terms[i]));
          }
          absl::StrAppendFormat(&out, " (%d elems)", op.elems);
          break;
        }
        case OpKind::kSignal:
          absl::StrAppendFormat(&out, " flag%d -> rank %d", op.flag, op.peer);
          break;
        case OpKind::kWaitFlag:
          absl::StrAppendFormat(&out, " flag%d", op.flag);
          break;
      }
      out += "\n";
    }
  }
  return out;
}

}  // namespace dmalab

// SimDevice: a CPU model of W ranks with memory, streams, events, DMA copies and kernels,
// executed by a deterministic scheduler and watched by checkers (docs/design.md section 6).
//
// Enqueued work runs when the host synchronizes (Synchronize, Read, Write). Then the scheduler
// repeatedly picks one stream whose next operation can run and runs it; which one is the
// seed's choice, so one seed fixes the whole interleaving and the same seed gives the same
// bytes and the same findings.
//
// Two fidelities (Fidelity: include/dmalab/sim.h). Values: real bytes and the host reference
// arithmetic, bit-identical to the CUDA kernels. Shadow: no payload, only each byte's provenance
// (include/dmalab/provenance.h, sim/shadow_memory.h), so whole-model scenarios replay in a fraction
// of the time; Read fails, ReadProvenance and WriteShadow work, and every checker below works the
// same.
//
// Checkers: happens-before races on byte intervals (vector clocks per stream; events snapshot
// and waits join; flag stores release and satisfied flag waits acquire), use after free and use
// after reuse (a view's allocation id against the allocator's), out-of-bounds views, and
// deadlock (no stream can progress while work remains) reported instead of hanging.
#ifndef DMALAB_SIM_SIM_DEVICE_H_
#define DMALAB_SIM_SIM_DEVICE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "dmalab/device.h"
#include "dmalab/provenance.h"
#include "dmalab/sim.h"
#include "sim/address_reservations.h"
#include "sim/fifo.h"
#include "sim/finding.h"
#include "sim/ipc_table.h"
#include "sim/race_checker.h"
#include "sim/shadow_memory.h"
#include "sim/sim_memory.h"
#include "sim/stream_bits.h"
#include "sim/timing_model.h"
#include "sim/topology.h"
#include "sim/vector_clock.h"

namespace dmalab {

class SimDevice : public Device {
 public:
  SimDevice(int world, uint64_t seed, Fidelity fidelity = Fidelity::kValues);
  ~SimDevice() override;

  int world_size() const override { return world_; }
  std::string name() const override { return "sim"; }
  absl::StatusOr<MemRef> Allocate(int rank, uint64_t bytes, std::string_view tag) override;
  // Stream-ordered on the rank's compute stream, as a caching allocator's free is: the block
  // may be handed out again at once; work not ordered before the free that still touches it
  // is reported.
  absl::Status Free(const MemRef& allocation) override;
  StreamId ComputeStream(int rank) override { return compute_streams_[rank]; }
  absl::StatusOr<StreamId> CreateStream(int rank, StreamKind kind, std::string_view name) override;
  absl::StatusOr<EventId> CreateEvent(int rank) override;
  absl::Status RecordEvent(EventId event, StreamId stream) override;
  absl::Status WaitEvent(StreamId stream, EventId event) override;
  absl::Status Copy(StreamId stream, const MemRef& dst, const MemRef& src,
                    std::string_view label) override;
  absl::Status Reduce(StreamId stream, DType dtype, const Operand& dst,
                      absl::Span<const Operand> terms, int64_t elems,
                      std::string_view label) override;
  absl::Status SignalFlag(StreamId stream, const MemRef& counter, const MemRef& peer_flag,
                          std::string_view label) override;
  absl::Status WaitFlag(StreamId stream, const MemRef& expected, const MemRef& flag,
                        std::string_view label) override;
  absl::Status WriteValue(StreamId stream, const MemRef& dst, uint64_t value,
                          std::string_view label) override;
  absl::Status WaitValue(StreamId stream, const MemRef& flag, uint64_t value,
                         std::string_view label) override;
  absl::Status Synchronize() override;
  absl::Status Write(const MemRef& dst, absl::Span<const uint8_t> bytes) override;
  absl::Status Read(const MemRef& src, absl::Span<uint8_t> bytes) override;
  // Values fidelity: the bytes are produced only where something reads them (sim/sim_memory.h).
  absl::Status WriteGenerated(const MemRef& dst,
                              std::shared_ptr<const GeneratedContent> content) override;
  void SetContext(std::string_view context) override {
    context_ = std::string(context);
    context_stored_ = false;
  }
  bool HoldsValues() const override { return fidelity_ == Fidelity::kValues; }
  // Shadow fidelity only.
  absl::Status WriteShadow(const MemRef& dst, uint64_t content) override;
  absl::StatusOr<Provenance> ReadProvenance(const MemRef& src) override;

  // Graphs, as CUDA's: CaptureGraph records, with their arguments and addresses, the operations
  // `body` enqueues on any stream (nothing runs); every LaunchGraph re-enqueues exactly those
  // operations, so a value baked in at capture (a flag target, a buffer address) is replayed
  // as captured, and every checker watches the replays. While capturing, host reads and writes
  // and synchronization are refused (as CUDA refuses them), and a wait may only name an event
  // recorded in the same capture. Allocations while capturing come from the graph's private pool
  // (as PyTorch's graph pools): a free while capturing returns a pool block to that pool at once
  // (the capture's stream order orders its uses), for later allocations of the same capture; the
  // pool's blocks are never handed to anything else, so the graph owns them for its lifetime and
  // its replays are not checked against the tensors that held them at capture. A free while
  // capturing of memory outside the pool is refused.
  bool SupportsGraphs() const override { return true; }
  bool IsCapturing(StreamId /*stream*/) const override { return capture_ != nullptr; }
  absl::StatusOr<GraphId> CaptureGraph(const std::function<absl::Status()>& body) override;
  absl::Status LaunchGraph(GraphId graph) override;

  // IPC (sim/ipc_table.h): per-rank address spaces, handles as opaque blobs, mappings whose
  // lifetime is checked against the owner's allocation.
  bool SupportsIpc() const override { return true; }
  absl::StatusOr<IpcHandle> ExportMemory(const MemRef& allocation) override;
  absl::StatusOr<MemRef> OpenMemory(int rank, const IpcHandle& handle) override;
  absl::Status CloseMemory(const MemRef& mapping) override;
  absl::StatusOr<IpcHandle> ExportEvent(EventId event) override;
  absl::StatusOr<EventId> OpenEvent(int rank, const IpcHandle& handle) override;
  // Deferred mappings (sim/address_reservations.h): work on a reserved range resolves it when
  // enqueued outside a capture, and at every launch when captured; nothing mapped there then is
  // an unmapped_address finding and an error.
  absl::StatusOr<MemRef> ReserveAddress(int rank, uint64_t bytes) override;
  absl::StatusOr<MemRef> OpenMemoryAt(int rank, const IpcHandle& handle,
                                      const MemRef& reserved) override;
  absl::Status ReleaseAddress(const MemRef& reserved) override;
  // Runs every operation that can run; never reports a deadlock (other ranks' host threads may
  // still enqueue what the rank's work waits for).
  absl::StatusOr<bool> RankIdle(int rank) override;
  absl::Status WriteRank(const MemRef& dst, absl::Span<const uint8_t> bytes) override;
  absl::Status ReadRank(const MemRef& src, absl::Span<uint8_t> bytes) override;
  // IPC mappings `rank` holds open; live allocations on `rank`.
  int64_t OpenMappings(int rank) const { return ipc_.OpenMappings(rank); }
  int64_t LiveAllocations(int rank) const override;

  Fidelity fidelity() const { return fidelity_; }

  uint64_t seed() const override { return seed_; }
  const FindingLog& findings() const { return findings_; }
  void ClearFindings() { findings_.Clear(); }
  // Operations executed so far.
  int64_t ops_executed() const { return ops_executed_; }

  // Timing (sim/timing_model.h): from now on every enqueue costs host time and every executed op
  // is timed on `topology`, which must outlive the device and hold at least world ranks. Without
  // a topology nothing is timed and now_us() stays 0.
  absl::Status SetTopology(const Topology* topology);
  // The simulated host clock, us: after Synchronize, the end of all work so far.
  double now_us() const { return timing_ ? timing_->now_us() : 0.0; }

 protected:
  // ReadPieces: every src is checked and recorded once, as its Read, then copied a piece at a
  // time, so the checkers see one host read of each whole range, as from Read.
  absl::Status ReadPiecesChecked(absl::Span<const MemRef> srcs, uint64_t bytes,
                                 uint64_t piece_bytes, PieceConsumer consume) override;

 private:
  enum class OpKind : uint8_t {
    kCopy,
    kReduce,
    kSignal,
    kWaitFlag,
    kWriteValue,
    kWaitValue,
    kRecord,
    kWaitEvent,
    kFree
  };
  struct Op {
    // What scheduling reads of every front first, together (Ready, RunReady).
    OpKind kind = OpKind::kCopy;
    bool wait_armed = false;
    bool deferred = false;  // captured with operands in reserved ranges: resolved at each launch
    EventId event;
    uint64_t event_seq = 0;    // kRecord: this record's number; kWaitEvent: the one waited for
    uint64_t wait_target = 0;  // kWaitFlag: set on the first attempt; kWaitValue, kWriteValue: the
                               // immediate value
    MemRef dst, src;           // copy; flags: dst = counter/expected, src = flag word
    int64_t id = 0;            // index into op_labels_
    VectorClock host_clock;    // the host's clock at enqueue: host work before it happened first
    DType dtype = DType::kBF16;
    Operand dst_operand;
    std::vector<Operand> terms;
    int64_t elems = 0;
    double host_us = 0;  // timing: host clock at enqueue
  };
  struct Stream {
    int rank;
    StreamKind kind;
    std::string name;
    Fifo<Op> queue;
    VectorClock clock;
  };
  struct Event {
    int rank;
    uint64_t records = 0;    // records enqueued so far
    uint64_t completed = 0;  // latest record executed
    // Per executed record still needed by a wait, and pending waits per record number; both
    // by record number. Few at a time (pruned as records and waits run): small sorted vectors.
    absl::InlinedVector<std::pair<uint64_t, VectorClock>, 2> clocks;
    absl::InlinedVector<std::pair<uint64_t, int>, 2> waiting;
    std::set<int> openers;  // peers that opened it through an IPC handle
    // The labels of its records and waits ("record evN", "wait evN"), interned at first use.
    int32_t record_label = -1;
    int32_t wait_label = -1;
  };
  // Drops the clocks of records no wait can still read: older than the latest executed record
  // (later waits name a later one) and not named by a pending wait. Keeps memory flat.
  static void PruneEventClocks(Event& e);

  // A captured graph: each operation with its stream and label, in enqueue order.
  struct CapturedOp {
    StreamId stream;
    Op op;
    std::string label;
  };
  struct Graph {
    std::vector<CapturedOp> ops;
    std::set<EventId> recorded;  // events recorded inside the capture
    uint32_t pool = 0;           // its private memory pool (SimMemory)
  };

  absl::Status CheckStream(StreamId s) const;
  // An error when a graph is being captured: `what` is not allowed then.
  absl::Status RefuseDuringCapture(std::string_view what) const;
  // The fork and join events LaunchGraph uses on `rank` / after `stream`.
  absl::StatusOr<EventId> LaunchEvent(std::map<int, EventId>& pool, int key, int rank);
  // Validates a view a caller passed and resolves it in place to the bytes it reaches: through
  // an IPC mapping, the owner's (a stale mapping is a finding); another rank's raw address is a
  // foreign_address finding and an error; a view without an allocation id gets the id of the
  // live allocation that covers it, so later frees are checked against it.
  absl::Status CheckMem(MemRef& m, std::string_view what);
  absl::Status ResolveMapping(MemRef& m, std::string_view what);
  absl::Status ResolveThrough(MemRef& m, const IpcMapping& map, std::string_view what);
  // A view in a reserved range: while capturing it stays as it is (resolved at every launch);
  // otherwise through the mapping placed there, or an unmapped_address finding and an error.
  // OpenMemory and OpenMemoryAt: maps a peer's handle on `rank`, into `reserved` when given.
  absl::StatusOr<MemRef> OpenPeerMemory(int rank, const IpcHandle& handle, const MemRef* reserved,
                                        std::string_view verb);
  absl::Status ResolveReserved(MemRef& m, std::string_view what);
  // A captured op's operands in reserved ranges, resolved for one launch.
  absl::Status ResolveDeferred(Op& op);
  // A stale_ipc_mapping finding when the allocation behind `map` was freed.
  void CheckExporterAlive(int opener, const IpcMapping& map, const MemRef& owner,
                          std::string_view verb);
  // An 8-byte aligned flag word, resolved as CheckMem does.
  absl::Status CheckFlagWord(MemRef& word, std::string_view what, std::string_view label);
  // The stream exists and `flag` is a valid 8-byte word, for WriteValue and WaitValue.
  absl::Status CheckValueFlag(StreamId stream, MemRef& flag, std::string_view what,
                              std::string_view label);
  absl::Status Enqueue(StreamId s, Op&& op, std::string_view label);
  // Outside a capture: with the label already interned.
  absl::Status EnqueueInterned(StreamId s, Op&& op, int32_t label);
  // RecordEvent and WaitEvent: "record evN" or "wait evN", interned once per event.
  absl::Status EnqueueEventOp(StreamId s, Op&& op, const char* verb, int32_t& label);
  int Timeline(StreamId s) const { return s.value() + 1; }
  bool Ready(Stream& s, Op& op);
  // Executes ready operations, the seed picking among them, until none is ready.
  void RunReady();
  // RunReady's bookkeeping, kept between calls (see RunReady).
  struct Scheduling {
    StreamBits is_ready, ask, waits_event;
    // Streams whose front waits on a flag word, by the rank of the word (most writes reach no
    // waited word: only the waits on the written rank are looked at).
    std::vector<StreamBits> waits_flag_on;
    std::vector<MemRef> flag;      // the word a flag-waiting front reads
    std::vector<char> waits_flag;  // whether the front waits on a flag
    std::vector<EventId> event;    // the event an event-waiting front waits for
  };
  Scheduling scheduling_;
  // Before host access: completes all work (Synchronize), or, for one rank's host thread
  // (WriteRank, ReadRank), what can run now.
  absl::Status CompleteForHost();
  bool rank_host_access_ = false;
  // Read up to the copy: completes the work, checks `src` (resolving a mapped range in place)
  // against a host buffer of `buffer_bytes`, and records the host's read of it.
  absl::Status StartHostRead(MemRef& src, uint64_t buffer_bytes);
  std::vector<uint8_t> read_pieces_;  // ReadPieces' copies: a piece of every src
  void Execute(StreamId sid, Op& op);
  void Access(StreamId sid, const Op& op, const MemRef& m, bool write);
  void CheckLifetime(int64_t op_id, const MemRef& m);
  std::string DescribeOp(int64_t op_id) const;
  std::string DescribeMemory(int rank, uint64_t lo, uint64_t hi) const;
  // The typed parts of a finding: the operation, and the bytes with their live allocation.
  FindingOp OpOf(int64_t op_id, std::string access) const;
  Finding NewFinding(FindingKind kind, int rank, uint64_t lo, uint64_t hi) const;
  uint64_t LoadU64(const MemRef& m);
  void StoreU64(const MemRef& m, uint64_t v);
  uint8_t* HostPtr(const MemRef& m);
  void ShadowCopy(const Op& op);
  void ShadowReduce(const Op& op);
  void ShadowStoreU64(const MemRef& m, uint64_t v);
  absl::Status CheckShadowCall(std::string_view what, MemRef& m);
  std::string DeadlockReport();
  static TimedOp::Kind TimedKind(OpKind kind);
  void Time(StreamId sid, const Op& op);

  int world_;
  uint64_t seed_;
  Fidelity fidelity_;
  std::mt19937_64 rng_;
  std::vector<SimMemory> memory_;
  IpcTable ipc_;
  AddressReservations reservations_;
  std::vector<ShadowMemory> shadow_;  // shadow fidelity: per rank
  std::set<std::pair<int, uint64_t>> unknown_words_reported_;
  std::vector<Stream> streams_;
  std::vector<StreamId> compute_streams_;
  std::vector<Event> events_;
  VectorClock host_clock_;
  absl::flat_hash_map<std::pair<int, uint64_t>, VectorClock>
      flag_clocks_;  // (rank, addr) -> released
  RaceChecker races_;
  FindingLog findings_;
  std::string context_;
  // Op descriptions, for findings. Memory stays flat in the number of ops: the context of a run
  // of ops (SetContext) is stored once, labels are interned, and only the last kOpLabelWindow
  // ops are described in full (older ones by number; findings almost always name recent ops).
  static constexpr int64_t kOpLabelWindow = int64_t{1} << 20;
  static constexpr size_t kMaxInternedLabels = size_t{1} << 16;
  struct OpLabel {
    int rank;
    StreamId stream;
    int64_t context;  // index into contexts_ (offset by first_context_), -1 for none
    int32_t label;    // index into labels_
  };
  int32_t InternLabel(std::string_view label);
  std::string OpText(const OpLabel& l) const;  // context and label
  Fifo<OpLabel> op_labels_;                    // ops first_op_id_, first_op_id_ + 1, ...
  int64_t first_op_id_ = 0;
  std::deque<std::string> contexts_;  // contexts first_context_, ...
  int64_t first_context_ = 0;
  bool context_stored_ = false;  // context_ is contexts_.back()
  std::vector<std::string> labels_;
  absl::flat_hash_map<std::string, int32_t> label_ids_;  // labels_ by text
  // The label ids last seen at a few addresses: callers pass the same strings again and again (a
  // cached plan's labels), so a label whose address and text match an entry needs no hashing.
  struct SeenLabel {  // 16 bytes: the whole table is 64 KiB
    const char* data = nullptr;
    uint32_t size = 0;
    int32_t id = -1;
  };
  static constexpr int kSeenLabelBits = 12;  // a plan of 8 ranks passes about 600 label strings
  std::vector<SeenLabel> seen_labels_ = std::vector<SeenLabel>(size_t{1} << kSeenLabelBits);
  absl::flat_hash_set<uint64_t> freed_;  // allocations whose free has executed
  int64_t ops_executed_ = 0;
  int64_t pending_ = 0;
  std::unique_ptr<TimingModel> timing_;  // null: no topology, nothing timed
  std::vector<Graph> graphs_;
  Graph* capture_ = nullptr;  // the graph being captured
  bool launching_ = false;    // LaunchGraph is enqueueing: the host pays one launch, not per op
  std::map<int, EventId> fork_events_;  // by rank
  std::map<int, EventId> join_events_;  // by stream
};

// A ReplayOptions::poll_device_findings for `device`: each call returns the findings the
// simulator's checkers made since the previous call, typed, and how many more they counted
// without keeping (FindingLog::kLimitPerKind).
std::function<DeviceFindings()> NewFindingsPoller(const SimDevice& device);

}  // namespace dmalab

#endif  // DMALAB_SIM_SIM_DEVICE_H_

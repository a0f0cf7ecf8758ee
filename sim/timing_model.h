// TimingModel: a discrete-event clock for SimDevice driven by a Topology (docs/design.md section
// 6).
//
// SimDevice tells the model what the host enqueues (each call costs host time) and, as its
// seeded scheduler executes ops, what each op was and what it waited for. At Synchronize the
// model replays the executed ops in simulated time, from their dependencies alone:
//
//   ready(op) = max(host enqueue time, end of the stream's previous op, end of the event record
//               it waits for)
//   copy:     holds one copy engine of its stream's GPU (FIFO when all are busy) for
//             latency_us + the time to move its bytes at its fair-share rate
//   reduce:   kernel overhead_us, then its traffic (terms read + destination written) at its
//             fair-share rate, capped at reduce_gbps
//   signal:   kernel overhead_us; its store lands at its end
//   wait:     ends at max(start + overhead_us, end of the satisfying store + flag latency_us)
//   record, event wait, free: no device time
//
// Rates: every transfer moving at a time gets its max-min fair share (sim/fair_share.h) of the
// resources it crosses: per GPU its memory (a same-GPU copy counts bytes twice: read and
// write; a peer copy once on each side), its port out and in, and every uplink direction and
// switch fabric on its route; each transfer is also capped by its link class (times the
// size-efficiency curve) or the reduce bandwidth. Rates change only when a transfer starts or
// ends, so the replay is exact for this fluid model.
//
// Determinism: the replay orders ties by (stream, position in stream), never by the order in
// which the scheduler happened to execute, so a plan's times do not depend on the seed. The one
// exception is a flag with several writers: a wait is tied to the lowest stored value that
// satisfied it, which for the single-writer, increasing counters of the ring is exact.
//
// Limits: flags are 8-byte stores with no bandwidth; a waiting kernel uses no resources; copy
// engines are granted first come, first served, whereas hardware may time-slice them; event
// waits and stream switches cost no device time; host calls other than enqueues (Read, Write,
// Allocate) cost no time.
#ifndef DMALAB_SIM_TIMING_MODEL_H_
#define DMALAB_SIM_TIMING_MODEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "sim/fair_share.h"
#include "sim/topology.h"

namespace dmalab {

// One executed op as SimDevice reports it.
struct TimedOp {
  enum class Kind { kCopy, kReduce, kSignal, kWaitFlag, kRecord, kWaitEvent, kFree };
  Kind kind = Kind::kFree;
  int stream = 0;      // SimDevice's stream id
  int rank = 0;        // the stream's rank
  double host_us = 0;  // host time at which it was enqueued (TimingModel::Enqueue)
  int src_rank = 0;    // kCopy
  int dst_rank = 0;    // kCopy
  uint64_t bytes = 0;  // kCopy: payload; kReduce: traffic (terms read + destination written)
  // kReduce with a block-coded operand: the traffic had every operand been plain (elems x dtype
  // bytes x operands); 0 when every operand is plain.
  uint64_t plain_bytes = 0;
  CodedKernel coded = CodedKernel::kRequantizingAdd;  // its kind, where plain_bytes > 0
  std::pair<int, uint64_t> flag;  // kSignal, kWaitFlag: (rank, address) of the flag word
  uint64_t value = 0;             // kSignal: the value stored; kWaitFlag: the value waited for
  int event = -1;                 // kRecord, kWaitEvent
  uint64_t event_seq = 0;  // kRecord: the record's number; kWaitEvent: the one waited for (0: none)
};

class TimingModel {
 public:
  // `topology` must outlive the model and hold at least `world` ranks.
  explicit TimingModel(const Topology& topology);

  // The host enqueues an op of `kind`: the host clock advances by the call's cost. Returns the
  // time from which the op may run.
  double Enqueue(TimedOp::Kind kind);
  // The host launches a captured graph: one kernel launch's cost, however many ops it holds;
  // its ops may run from the returned time (SimDevice enqueues them without further cost).
  double LaunchGraph();
  // The scheduler executed `op`. Ops must arrive in an order their dependencies allow (each
  // stream in order, a record before its waits, a store before the wait it satisfies).
  void Executed(const TimedOp& op);
  // Times every executed op; the host clock moves to the end of the last one.
  void Synchronize();

  // The host clock, us.
  double now_us() const { return host_us_; }
  // End of the latest op so far, us.
  double device_end_us() const { return device_end_us_; }

 private:
  // A dependency: an op of the current batch (node >= 0) or a time already known.
  struct Ref {
    int node = -1;
    double time_us = 0;
  };
  struct Node {
    int stream = 0;
    int64_t seq = 0;  // position in its stream: the deterministic tie-break
    TimedOp::Kind kind = TimedOp::Kind::kFree;
    double earliest_us = 0;  // host enqueue time and known dependency times
    double fixed_us = 0;     // latency or kernel overhead before its bytes move
    double work_bytes = 0;   // bytes moved at the fair-share rate after fixed_us
    FlowDemand demand;
    int engine_gpu = -1;      // copies: the GPU whose copy engine it holds
    std::vector<int> deps;    // batch nodes that must end before it starts
    std::optional<Ref> wake;  // kWaitFlag: the store it waits for
    // Replay state.
    int unmet = 0;
    double ready_us = 0, start_us = 0, end_us = 0, remaining = 0, rate_gbps = 0;
    bool started = false, done = false, holds_engine = false;
    std::vector<int> dependents, wakes;
  };

  void AddDep(Node& n, const Ref& ref) const;
  double RefTime(const Ref& ref) const;
  Node MakeNode(const TimedOp& op) const;
  int ResourceOfUplink(int uplink, int kind) const;

  const Topology& topo_;
  std::vector<double> capacities_gbps_;  // per resource, see ResourceOfUplink
  double host_us_ = 0;
  double device_end_us_ = 0;
  std::vector<Node> batch_;                          // executed since the last Synchronize
  std::vector<Ref> stream_last_;                     // per stream: its latest op
  std::vector<int64_t> stream_seq_;                  // per stream: ops executed so far
  std::map<std::pair<int, uint64_t>, Ref> records_;  // (event, record number) -> the record
  std::map<std::pair<int, uint64_t>, std::map<uint64_t, Ref>> stores_;  // flag -> value -> store
};

}  // namespace dmalab

#endif  // DMALAB_SIM_TIMING_MODEL_H_

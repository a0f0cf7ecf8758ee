#include "sim/timing_model.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <numeric>
#include <queue>
#include <tuple>

namespace dmalab {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// GB/s to bytes per us.
constexpr double kBytesPerUsPerGbps = 1e3;

// Resource layout: per GPU its memory, port out, port in and codec compute; then per uplink its
// link up, its link down and its fabric.
enum ResourceKind { kMemory = 0, kPortOut = 1, kPortIn = 2, kCodec = 3 };
constexpr int kGpuResources = 4;
enum UplinkResource { kUplinkUp = 0, kUplinkDown = 1, kUplinkFabric = 2 };

}  // namespace

TimingModel::TimingModel(const Topology& topology) : topo_(topology) {
  const int g = topo_.gpus;
  capacities_gbps_.assign(kGpuResources * g + 3 * topo_.uplinks.size(), 0.0);
  for (int i = 0; i < g; ++i) {
    capacities_gbps_[kMemory * g + i] = topo_.memory_gbps;
    capacities_gbps_[kPortOut * g + i] = topo_.port_gbps;
    capacities_gbps_[kPortIn * g + i] = topo_.port_gbps;
    capacities_gbps_[kCodec * g + i] = topo_.codec_gpu_gbps;
  }
  for (size_t u = 0; u < topo_.uplinks.size(); ++u) {
    const Uplink& up = topo_.uplinks[u];
    capacities_gbps_[ResourceOfUplink(u, kUplinkUp)] = up.gbps;
    capacities_gbps_[ResourceOfUplink(u, kUplinkDown)] = up.gbps;
    capacities_gbps_[ResourceOfUplink(u, kUplinkFabric)] = up.fabric_gbps;
  }
}

int TimingModel::ResourceOfUplink(int uplink, int kind) const {
  return kGpuResources * topo_.gpus + 3 * uplink + kind;
}

double TimingModel::LaunchGraph() {
  host_us_ += topo_.kernel_launch_us;
  return host_us_;
}

double TimingModel::Enqueue(TimedOp::Kind kind) {
  switch (kind) {
    case TimedOp::Kind::kCopy:
      host_us_ += topo_.copy_launch_us;
      break;
    case TimedOp::Kind::kReduce:
    case TimedOp::Kind::kSignal:
    case TimedOp::Kind::kWaitFlag:
      host_us_ += topo_.kernel_launch_us;
      break;
    case TimedOp::Kind::kRecord:
    case TimedOp::Kind::kWaitEvent:
      host_us_ += topo_.event_us;
      break;
    case TimedOp::Kind::kFree:
      break;
  }
  return host_us_;
}

double TimingModel::RefTime(const Ref& ref) const {
  return ref.node >= 0 ? batch_[ref.node].end_us : ref.time_us;
}

void TimingModel::AddDep(Node& n, const Ref& ref) const {
  if (ref.node >= 0) {
    n.deps.push_back(ref.node);
  } else {
    n.earliest_us = std::max(n.earliest_us, ref.time_us);
  }
}

TimingModel::Node TimingModel::MakeNode(const TimedOp& op) const {
  Node n;
  n.stream = op.stream;
  n.kind = op.kind;
  n.earliest_us = op.host_us;
  const int g = topo_.gpus;
  auto use = [&](int resource, double bytes_per_byte) {
    if (capacities_gbps_[resource] > 0) n.demand.uses.push_back({resource, bytes_per_byte});
  };
  switch (op.kind) {
    case TimedOp::Kind::kCopy: {
      const int src = topo_.rank_gpus[op.src_rank], dst = topo_.rank_gpus[op.dst_rank];
      const LinkClass& link = topo_.LinkBetween(src, dst);
      n.fixed_us = link.latency_us;
      n.work_bytes = static_cast<double>(op.bytes);
      n.demand.cap_gbps = link.RateGbps(n.work_bytes);
      n.engine_gpu = topo_.rank_gpus[op.rank];
      if (src == dst) {
        use(kMemory * g + src, 2);  // read and written in the same memory
        break;
      }
      use(kMemory * g + src, 1);
      use(kMemory * g + dst, 1);
      use(kPortOut * g + src, 1);
      use(kPortIn * g + dst, 1);
      for (const UplinkUse& u : RouteBetween(topo_, src, dst)) {
        use(ResourceOfUplink(u.uplink, u.kind == UplinkUse::Kind::kUp     ? kUplinkUp
                                       : u.kind == UplinkUse::Kind::kDown ? kUplinkDown
                                                                          : kUplinkFabric),
            1);
      }
      break;
    }
    case TimedOp::Kind::kReduce:
      n.fixed_us = topo_.kernel_overhead_us;
      if (op.plain_bytes > 0 && topo_.codec_gbps > 0) {
        // Coding costs per element: the work is the plain-equivalent traffic, while the memory
        // carries only the encoded bytes. Coded kernels running at once on one GPU share its
        // codec_gpu_gbps, where the topology gives one.
        // The GPU's share is counted in requantizing adds (what codec_gpu_gbps was measured
        // with): a kind twice as fast takes half as much of it per byte.
        const double rate = topo_.CodecGbps(op.coded);
        n.work_bytes = static_cast<double>(op.plain_bytes);
        n.demand.cap_gbps = rate;
        use(kCodec * g + topo_.rank_gpus[op.rank], topo_.codec_gbps / rate);
        use(kMemory * g + topo_.rank_gpus[op.rank],
            static_cast<double>(op.bytes) / static_cast<double>(op.plain_bytes));
        break;
      }
      n.work_bytes = static_cast<double>(op.bytes);
      n.demand.cap_gbps = topo_.reduce_gbps;
      use(kMemory * g + topo_.rank_gpus[op.rank], 1);
      break;
    case TimedOp::Kind::kSignal:
    case TimedOp::Kind::kWaitFlag:
      n.fixed_us = topo_.kernel_overhead_us;
      break;
    default:
      break;
  }
  return n;
}

void TimingModel::Executed(const TimedOp& op) {
  const size_t s = static_cast<size_t>(op.stream);
  if (stream_last_.size() <= s) {
    stream_last_.resize(s + 1);
    stream_seq_.resize(s + 1, 0);
  }
  Node n = MakeNode(op);
  n.seq = stream_seq_[s]++;
  AddDep(n, stream_last_[s]);
  const int self = static_cast<int>(batch_.size());
  switch (op.kind) {
    case TimedOp::Kind::kWaitEvent:
      if (auto it = records_.find({op.event, op.event_seq}); it != records_.end()) {
        AddDep(n, it->second);
      }
      break;
    case TimedOp::Kind::kRecord:
      records_[{op.event, op.event_seq}] = Ref{self, 0};
      break;
    case TimedOp::Kind::kSignal:
      stores_[op.flag][op.value] = Ref{self, 0};
      break;
    case TimedOp::Kind::kWaitFlag: {
      // The lowest stored value that satisfies the wait; smaller ones can satisfy no later wait
      // of this increasing counter. No store at all: the host wrote the flag.
      std::map<uint64_t, Ref>& stores = stores_[op.flag];
      auto it = stores.lower_bound(op.value);
      if (it != stores.end()) n.wake = it->second;
      stores.erase(stores.begin(), it);
      break;
    }
    default:
      break;
  }
  stream_last_[s] = Ref{self, 0};
  batch_.push_back(std::move(n));
}

void TimingModel::Synchronize() {
  const int n = static_cast<int>(batch_.size());
  // The deterministic order: stream, then position in the stream.
  std::vector<int> order(n), key(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return std::tie(batch_[a].stream, batch_[a].seq) < std::tie(batch_[b].stream, batch_[b].seq);
  });
  for (int i = 0; i < n; ++i) key[order[i]] = i;
  for (int i = 0; i < n; ++i) {
    Node& node = batch_[i];
    node.unmet = static_cast<int>(node.deps.size());
    node.ready_us = node.earliest_us;
    for (int d : node.deps) batch_[d].dependents.push_back(i);
    if (node.wake && node.wake->node >= 0) batch_[node.wake->node].wakes.push_back(i);
  }

  enum EventKind { kReady, kFixedDone, kEnd };
  using Event = std::tuple<double, int, int, int>;  // time, key, kind, node
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  auto push = [&](double t, EventKind kind, int i) { events.emplace(t, key[i], kind, i); };
  std::vector<int> free_engines(topo_.gpus, topo_.copy_engines);
  std::vector<std::deque<int>> engine_queue(topo_.gpus);
  std::vector<int> flows;  // nodes moving bytes, in key order
  bool rates_stale = false;
  double now = 0;

  auto wake_end = [&](const Node& w, double store_end) {
    return std::max(w.start_us + w.fixed_us, store_end + topo_.flag_latency_us);
  };
  auto start = [&](int i, double t) {
    Node& node = batch_[i];
    node.started = true;
    node.start_us = t;
    if (node.kind != TimedOp::Kind::kWaitFlag) {
      push(t + node.fixed_us, kFixedDone, i);
    } else if (!node.wake) {
      push(t + node.fixed_us, kEnd, i);
    } else if (node.wake->node < 0 || batch_[node.wake->node].done) {
      push(wake_end(node, RefTime(*node.wake)), kEnd, i);
    }  // else the store's completion pushes the end
  };
  auto ready = [&](int i, double t) {
    Node& node = batch_[i];
    if (node.engine_gpu < 0) return start(i, t);
    if (free_engines[node.engine_gpu] == 0) return engine_queue[node.engine_gpu].push_back(i);
    --free_engines[node.engine_gpu];
    node.holds_engine = true;
    start(i, t);
  };
  auto complete = [&](int i, double t) {
    Node& node = batch_[i];
    node.done = true;
    node.end_us = t;
    if (node.holds_engine) {
      std::deque<int>& q = engine_queue[node.engine_gpu];
      if (q.empty()) {
        ++free_engines[node.engine_gpu];
      } else {  // hand the engine straight to the longest waiter
        batch_[q.front()].holds_engine = true;
        start(q.front(), t);
        q.pop_front();
      }
    }
    for (int d : node.dependents) {
      Node& dep = batch_[d];
      dep.ready_us = std::max(dep.ready_us, t);
      if (--dep.unmet == 0) push(dep.ready_us, kReady, d);
    }
    for (int w : node.wakes) {
      if (batch_[w].started) push(wake_end(batch_[w], t), kEnd, w);
    }
  };

  for (int i = 0; i < n; ++i) {
    if (batch_[i].unmet == 0) push(batch_[i].ready_us, kReady, i);
  }
  while (!events.empty() || !flows.empty()) {
    if (rates_stale) {
      std::vector<const FlowDemand*> demands;
      for (int f : flows) demands.push_back(&batch_[f].demand);
      const std::vector<double> rates = MaxMinFairRates(demands, capacities_gbps_);
      for (size_t k = 0; k < flows.size(); ++k) batch_[flows[k]].rate_gbps = rates[k];
      rates_stale = false;
    }
    double t_flow = kInf;
    int first_done = -1;  // the flow that ends at t_flow
    for (int f : flows) {
      const Node& node = batch_[f];
      if (node.rate_gbps > 0) {
        const double end = now + node.remaining / (node.rate_gbps * kBytesPerUsPerGbps);
        if (end < t_flow) {
          t_flow = end;
          first_done = f;
        }
      }
    }
    const double t_event = events.empty() ? kInf : std::get<0>(events.top());
    const double t = std::min(t_flow, t_event);
    if (t == kInf) break;  // unreachable: capacities and caps are > 0, so every transfer moves
    for (int f : flows) batch_[f].remaining -= batch_[f].rate_gbps * kBytesPerUsPerGbps * (t - now);
    now = t;
    if (t_flow <= t_event) {
      std::vector<int> finished, moving;
      for (int f : flows) {
        // Relative slack: transfers ending together must not leave a sliver of bytes. The flow
        // that defined t_flow ends now whatever rounding left of it: at very low rates and late
        // times, now + remaining / rate can round back to now, and a sliver that never shrinks
        // would stop the clock for good.
        const bool done = f == first_done || batch_[f].remaining <= 1e-9 * batch_[f].work_bytes;
        (done ? finished : moving).push_back(f);
      }
      flows = std::move(moving);
      rates_stale = true;
      for (int f : finished) complete(f, now);
      continue;
    }
    const auto [time, k, kind, i] = events.top();
    events.pop();
    switch (kind) {
      case kReady:
        ready(i, time);
        break;
      case kFixedDone:
        if (batch_[i].work_bytes > 0) {
          batch_[i].remaining = batch_[i].work_bytes;
          flows.insert(std::upper_bound(flows.begin(), flows.end(), i,
                                        [&](int a, int b) { return key[a] < key[b]; }),
                       i);
          rates_stale = true;
        } else {
          complete(i, time);
        }
        break;
      case kEnd:
        complete(i, time);
        break;
    }
  }

  // Later batches see this one's ops as known times.
  auto settle = [&](Ref& ref) {
    if (ref.node >= 0) ref = Ref{-1, batch_[ref.node].end_us};
  };
  for (Ref& r : stream_last_) settle(r);
  for (auto& [k, r] : records_) settle(r);
  for (auto& [flag, stores] : stores_) {
    for (auto& [v, r] : stores) settle(r);
  }
  // Waits enqueued from now on name each event's latest record; older ones are done with.
  for (auto it = records_.begin(); it != records_.end();) {
    auto next = std::next(it);
    if (next != records_.end() && next->first.first == it->first.first) {
      records_.erase(it);
    }
    it = next;
  }
  for (const Node& node : batch_) device_end_us_ = std::max(device_end_us_, node.end_us);
  host_us_ = std::max(host_us_, device_end_us_);
  batch_.clear();
}

}  // namespace dmalab

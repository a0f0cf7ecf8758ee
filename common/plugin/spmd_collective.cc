#include "common/plugin/spmd_collective.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/core/byte_codec.h"
#include "common/core/status_macros.h"
#include "common/plugin/abi_convert.h"

namespace dmalab {
namespace {

constexpr int kMaxDims = 64;

struct BootstrapCtx {
  SpmdCollective* self;
  Bootstrap* bootstrap;
  RankApi* rank;
  std::vector<std::string>* deadlocks;
};

int32_t BootstrapResult(BootstrapCtx* c, const absl::Status& s) {
  if (absl::IsDeadlineExceeded(s)) c->deadlocks->push_back(std::string(s.message()));
  return c->rank->Done(s);
}

int32_t BootstrapAllGather(void* ctx, const void* send, void* recv, uint64_t bytes) {
  auto* c = static_cast<BootstrapCtx*>(ctx);
  if ((send == nullptr || recv == nullptr) && bytes > 0) {
    return c->rank->Done(absl::InvalidArgumentError("bootstrap allgather: send or recv is NULL"));
  }
  const uint64_t world = c->bootstrap->world();
  if (bytes > (uint64_t{1} << 30) / world) {
    return c->rank->Done(absl::InvalidArgumentError(
        absl::StrFormat("bootstrap allgather: %d bytes per rank; at most %d (1 GiB in all)", bytes,
                        (uint64_t{1} << 30) / world)));
  }
  return BootstrapResult(
      c, c->bootstrap->AllGather(c->rank->rank(),
                                 absl::MakeConstSpan(static_cast<const uint8_t*>(send), bytes),
                                 absl::MakeSpan(static_cast<uint8_t*>(recv), bytes * world)));
}

int32_t BootstrapBarrier(void* ctx) {
  auto* c = static_cast<BootstrapCtx*>(ctx);
  return BootstrapResult(c, c->bootstrap->Barrier(c->rank->rank()));
}

struct LogCtx {
  std::string plugin;
  int rank;
};

void Log(void* ctx, int32_t level, const char* message) {
  const auto* c = static_cast<const LogCtx*>(ctx);
  static constexpr const char* kLevels[] = {"error", "warning", "info", "debug"};
  const char* name = level >= 0 && level <= DMALAB_LOG_DEBUG ? kLevels[level] : "log";
  std::fprintf(stderr, "dmalab: plugin '%s' rank %d %s: %s\n", c->plugin.c_str(), c->rank, name,
               message == nullptr ? "" : message);
}

absl::StatusOr<dmalab_tensor> Describe(const TensorView& v, std::string_view what) {
  if (v.shape.size() > kMaxDims) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s has %d dimensions; plugins take at most %d", what, v.shape.size(), kMaxDims));
  }
  if (!v.contiguous) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s is not contiguous; plugins take dense tensors", what));
  }
  dmalab_tensor t{};
  const MemRef m = v.mem.Slice(0, v.bytes());
  t.mem.rank = m.rank;
  t.mem.addr = m.addr;
  t.mem.bytes = m.bytes;
  t.mem.alloc_id = m.alloc_id;
  t.dtype = DTypeToAbi(v.dtype);
  t.ndim = static_cast<int32_t>(v.shape.size());
  t.elems = v.elems();
  t.shape = v.shape.data();
  return t;
}

}  // namespace

// The contexts handed to C, one per rank; they live as long as the collective.
struct SpmdContexts {
  std::vector<BootstrapCtx> bootstrap;
  std::vector<LogCtx> log;
};

SpmdCollective::SpmdCollective(Device* device, std::unique_ptr<PluginLibrary> lib,
                               SpmdProcess* process)
    : device_(device), process_(process), lib_(std::move(lib)), plugin_(lib_->v2()) {
  if (process != nullptr) {
    rank_device_ =
        std::make_unique<RankDevice>(process->local(), process->rank(), device->world_size());
    host_.device = rank_device_.get();
    here_ = {process->rank()};
    return;
  }
  threads_ =
      std::make_unique<RankThreads>(device->world_size(), device->seed() ^ 0x686f73745f727566ull);
  thread_bootstrap_ = std::make_unique<ThreadBootstrap>(threads_.get());
  host_.device = device;
  host_.threads = threads_.get();
  for (int r = 0; r < device->world_size(); ++r) here_.push_back(r);
}

Bootstrap* SpmdCollective::bootstrap() {
  return process_ != nullptr ? process_->bootstrap() : thread_bootstrap_.get();
}

SpmdCollective::~SpmdCollective() {
  if (!closed_) (void)Close();
}

absl::StatusOr<std::unique_ptr<SpmdCollective>> SpmdCollective::Create(
    Device* device, std::unique_ptr<PluginLibrary> lib, const PluginConfig& config,
    SpmdProcess* process) {
  if (lib->abi() != 2) return lib->Error("it speaks plugin ABI v1, not v2 (SPMD)");
  if (process != nullptr && process->world() != device->world_size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rank %d runs as one of %d processes, but the device has %d ranks",
                        process->rank(), process->world(), device->world_size()));
  }
  std::unique_ptr<SpmdCollective> c(new SpmdCollective(device, std::move(lib), process));
  const int world = device->world_size();
  auto contexts = std::make_shared<SpmdContexts>();
  contexts->bootstrap.resize(world);
  contexts->log.resize(world);
  c->ranks_.resize(world);
  for (int r : c->here_) {
    c->ranks_[r] = std::make_unique<RankApi>(&c->host_, r);
    contexts->bootstrap[r] =
        BootstrapCtx{c.get(), c->bootstrap(), c->ranks_[r].get(), &c->deadlocks_};
    contexts->log[r] = LogCtx{c->plugin_->name, r};
  }
  c->contexts_ = contexts;
  c->bootstrap_tables_.resize(world);
  for (int r : c->here_) {
    dmalab_bootstrap& b = c->bootstrap_tables_[r];
    b.struct_size = sizeof(b);
    b.ctx = &contexts->bootstrap[r];
    b.allgather = BootstrapAllGather;
    b.barrier = BootstrapBarrier;
  }
  c->states_.assign(world, nullptr);
  c->growth_.resize(world);
  std::vector<dmalab_rank_config> configs(world);
  for (int r : c->here_) {
    dmalab_rank_config& k = configs[r];
    k.struct_size = sizeof(k);
    k.rank = r;
    k.world_size = world;
    k.dtype = DTypeToAbi(config.dtype);
    k.max_bytes = config.max_bytes;
    k.options = config.options.c_str();
    k.log = Log;
    k.log_ctx = &contexts->log[r];
  }
  absl::Status s = c->OnEveryRank("create", [&](int r) {
    return c->plugin_->create(c->ranks_[r]->table(), &c->bootstrap_tables_[r], &configs[r],
                              &c->states_[r]);
  });
  for (int r : c->here_) {
    if (s.ok() && c->states_[r] == nullptr) {
      s = absl::InvalidArgumentError(
          absl::StrFormat("rank %d's create returned DMALAB_OK but no state", r));
    }
  }
  s = c->Agree(s, "create");
  if (!s.ok()) {
    return c->lib_->Error(absl::StrCat("create failed: ", s.message()));
  }
  for (int r : c->here_) c->growth_[r].Start(c->ranks_[r]->held().total());
  return c;
}

std::string SpmdCollective::name() const { return absl::StrCat("plugin:", plugin_->name); }

void SpmdCollective::AddFinding(std::string checker, int rank, std::string detail) {
  DeviceFinding f;
  f.checker = std::move(checker);
  f.rank = rank;
  f.detail = std::move(detail);
  findings_.findings.push_back(std::move(f));
}

absl::Status SpmdCollective::RankStatus(int rank, int32_t code, std::string_view what) const {
  if (code == DMALAB_OK) return absl::OkStatus();
  const char* e = states_[rank] != nullptr ? plugin_->last_error(states_[rank]) : nullptr;
  const std::string why = e != nullptr && e[0] != '\0'
                              ? std::string(e)
                              : std::string(ranks_[rank]->last_error()[0] != '\0'
                                                ? ranks_[rank]->last_error()
                                                : "(the plugin's last_error gives no message)");
  const std::string text =
      absl::StrFormat("plugin '%s' rank %d failed %s: %s", plugin_->name, rank, what, why);
  switch (code) {
    case DMALAB_ERROR_BAD_ARGUMENT:
      return absl::InvalidArgumentError(text);
    case DMALAB_ERROR_UNSUPPORTED:
      return absl::FailedPreconditionError(absl::StrCat(text, " (unsupported request)"));
    case DMALAB_ERROR_INTERNAL:
      return absl::AbortedError(text);
  }
  return absl::AbortedError(
      absl::StrFormat("%s (it returned %d, which is no DMALAB_* code)", text, code));
}

absl::Status SpmdCollective::OnEveryRank(std::string_view what,
                                         const std::function<int32_t(int)>& call) {
  if (thread_bootstrap_ != nullptr && thread_bootstrap_->broken()) {
    return absl::AbortedError(absl::StrFormat(
        "plugin '%s': %s not run: its ranks lost step in an earlier bootstrap deadlock",
        plugin_->name, what));
  }
  const int world = device_->world_size();
  std::vector<int32_t> codes(world, DMALAB_OK);
  deadlocks_.clear();
  if (threads_ != nullptr) {
    for (int r = 0; r < world; ++r) thread_bootstrap_->SetActivity(r, std::string(what));
    threads_->Run([&](int r) {
      codes[r] = call(r);
      thread_bootstrap_->SetActivity(r, absl::StrFormat("it returned from %s", what));
      return absl::OkStatus();
    });
  } else {
    for (int r : here_) codes[r] = call(r);
  }
  for (const std::string& d : deadlocks_) AddFinding("deadlock", -1, d);
  for (int r : here_) {
    std::vector<std::string> v = ranks_[r]->TakeViolations();
    if (!v.empty()) {
      return absl::AbortedError(
          absl::StrFormat("plugin '%s' rank %d broke the ABI's ownership "
                          "rule in %s: %s",
                          plugin_->name, r, what, absl::StrJoin(v, "; ")));
    }
  }
  if (!deadlocks_.empty()) {
    return absl::AbortedError(
        absl::StrFormat("plugin '%s' %s: %s", plugin_->name, what, deadlocks_.front()));
  }
  for (int r : here_) {
    DMALAB_RETURN_IF_ERROR(RankStatus(r, codes[r], what));
  }
  return absl::OkStatus();
}

absl::Status SpmdCollective::Agree(absl::Status local, std::string_view what) {
  if (process_ == nullptr) return local;
  // What this rank contributes: its status, then its findings since the last agreement.
  ByteWriter out;
  out.U64(static_cast<uint64_t>(local.code())).Str(std::string(local.message()));
  out.U64(findings_.findings.size() - agreed_);
  for (size_t i = agreed_; i < findings_.findings.size(); ++i) {
    const DeviceFinding& f = findings_.findings[i];
    out.Str(f.checker).I64(f.rank).Str(f.detail);
  }
  std::string blob = out.Take();
  const int world = device_->world_size();
  const int me = process_->rank();
  Bootstrap* b = process_->bootstrap();
  // The ranks' outcome could not be gathered (a process ended, or an instance is still inside a
  // bootstrap call of its own): this rank's own failure names it best.
  const auto lost = [&](const absl::Status& s) {
    if (!local.ok()) return local;
    return Prefixed(absl::StrFormat("plugin '%s' %s: the ranks' outcomes could not be gathered: ",
                                    plugin_->name, what),
                    s);
  };
  absl::StatusOr<std::vector<std::string>> all = AllGatherBytes(*b, me, blob);
  if (!all.ok()) return lost(all.status());
  findings_.findings.resize(agreed_);
  absl::Status first;
  for (int r = 0; r < world; ++r) {
    ByteReader in((*all)[r]);
    const auto code = static_cast<absl::StatusCode>(in.U64());
    const std::string message = in.Str();
    if (first.ok() && code != absl::StatusCode::kOk) first = absl::Status(code, message);
    // A finding takes at least its three fields' 24 bytes.
    for (uint64_t n = in.Count(24), i = 0; i < n; ++i) {
      DeviceFinding f;
      f.checker = in.Str();
      f.rank = static_cast<int32_t>(in.I64());
      f.detail = in.Str();
      if (in.error().empty()) findings_.findings.push_back(std::move(f));
    }
    if (!in.error().empty() && first.ok()) {
      first = absl::DataLossError(absl::StrFormat("plugin '%s' %s: rank %d's outcome: %s",
                                                  plugin_->name, what, r, in.error()));
    }
  }
  agreed_ = findings_.findings.size();
  return first;
}

absl::StatusOr<TensorView> SpmdCollective::Own(const TensorView& v) const {
  if (process_ == nullptr) return v;
  DMALAB_ASSIGN_OR_RETURN(MemRef local, process_->ToLocal(v.mem));
  TensorView own = v;
  own.mem = rank_device_->Up(local);
  return own;
}

void SpmdCollective::CheckGrowth(std::string_view call) {
  // A captured call may register its buffers for the graph's lifetime (one reserved range per
  // peer, mapped after the capture): that is the graph's size, not a leak per call.
  if (device_->IsCapturing(device_->ComputeStream(here_.front()))) return;
  for (int r : here_) {
    const HeldResources h = ranks_[r]->held();
    if (!growth_[r].After(h.total())) continue;
    AddFinding("resource_growth", r,
               absl::StrFormat(
                   "plugin '%s' rank %d holds more after each of the last %d calls (through %s): "
                   "now %d allocations, %d IPC mappings, %d streams, %d events, %d reserved "
                   "ranges; a collective whose resources grow with every call in steady state "
                   "overflows its tables or the device's memory",
                   plugin_->name, r, ResourceGrowth::kCalls, call, h.allocations, h.mappings,
                   h.streams, h.events, h.reservations));
  }
}

absl::StatusOr<std::vector<TensorView>> SpmdCollective::AllReduce(
    absl::Span<const TensorView> inputs) {
  const std::string call = absl::StrFormat("all_reduce call %d (default form)", ++calls_);
  const int world = device_->world_size();
  if (closed_) return absl::FailedPreconditionError(call + ": the collective was closed");
  if (static_cast<int>(inputs.size()) != world) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %d inputs for %d ranks", call, inputs.size(), world));
  }
  // Every rank's tensor is checked (the same verdict in every process); only the ranks run here
  // are handed to instances.
  std::vector<dmalab_tensor> in(world);
  for (int r = 0; r < world; ++r) {
    DMALAB_RETURN_IF_ERROR(Describe(inputs[r], absl::StrFormat("inputs[%d]", r)).status());
  }
  // The views live through the call: the described tensors point to their shapes.
  std::vector<TensorView> own(world);
  for (int r : here_) {
    DMALAB_ASSIGN_OR_RETURN(own[r], Own(inputs[r]));
    in[r] = *Describe(own[r], "");
    ranks_[r]->Handed(own[r].mem);
  }
  std::vector<dmalab_mem> results(world);
  absl::Status s = OnEveryRank(
      call, [&](int r) { return plugin_->all_reduce(states_[r], &in[r], &results[r]); });
  std::vector<TensorView> outs(world);
  for (int r : here_) {
    if (!s.ok()) break;
    const MemRef m{results[r].rank, results[r].addr, results[r].bytes, results[r].alloc_id};
    if (m.rank != r || m.bytes < inputs[r].bytes()) {
      s = absl::AbortedError(absl::StrFormat(
          "plugin '%s' %s: rank %d's result is on rank %d, %d bytes; it must be on rank %d and "
          "hold %d bytes",
          plugin_->name, call, r, m.rank, m.bytes, r, inputs[r].bytes()));
      break;
    }
    s = ranks_[r]->HandOver(m, call);
    if (!s.ok()) break;
    absl::StatusOr<MemRef> resolved = ranks_[r]->FromPlugin(&results[r], "result");
    outs[r] = TensorView{*resolved, inputs[r].dtype, inputs[r].shape, true};
  }
  if (s.ok()) CheckGrowth(call);
  DMALAB_RETURN_IF_ERROR(Agree(s, call));
  if (process_ != nullptr) {
    // Each rank's result, its instance's allocation on its own device, becomes a tensor of the
    // command's device in every process.
    for (int r = 0; r < world; ++r) {
      MemRef local;
      if (r == process_->rank()) {
        DMALAB_ASSIGN_OR_RETURN(local, rank_device_->Down(outs[r].mem, call));
      }
      absl::StatusOr<MemRef> adopted = process_->Adopt(r, local);
      if (!adopted.ok()) {
        return Prefixed(
            absl::StrFormat("plugin '%s' %s: rank %d's result: ", plugin_->name, call, r),
            adopted.status());
      }
      outs[r] = TensorView{*adopted, inputs[r].dtype, inputs[r].shape, true};
    }
  }
  return outs;
}

absl::Status SpmdCollective::AllReduce(absl::Span<const TensorView> inputs,
                                       absl::Span<const TensorView> outs) {
  const std::string call = absl::StrFormat("all_reduce call %d (explicit form)", ++calls_);
  const int world = device_->world_size();
  if (closed_) return absl::FailedPreconditionError(call + ": the collective was closed");
  if (static_cast<int>(inputs.size()) != world || outs.size() != inputs.size()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %d inputs and %d outs for %d ranks",
                                                      call, inputs.size(), outs.size(), world));
  }
  std::vector<dmalab_tensor> in(world), out(world);
  for (int r = 0; r < world; ++r) {
    DMALAB_RETURN_IF_ERROR(Describe(inputs[r], absl::StrFormat("inputs[%d]", r)).status());
    DMALAB_RETURN_IF_ERROR(Describe(outs[r], absl::StrFormat("outs[%d]", r)).status());
  }
  // The views live through the call: the described tensors point to their shapes.
  std::vector<TensorView> own_in(world), own_out(world);
  for (int r : here_) {
    DMALAB_ASSIGN_OR_RETURN(own_in[r], Own(inputs[r]));
    DMALAB_ASSIGN_OR_RETURN(own_out[r], Own(outs[r]));
    in[r] = *Describe(own_in[r], "");
    out[r] = *Describe(own_out[r], "");
    ranks_[r]->Handed(own_in[r].mem);
    ranks_[r]->Handed(own_out[r].mem);
  }
  absl::Status s = OnEveryRank(
      call, [&](int r) { return plugin_->all_reduce_into(states_[r], &in[r], &out[r]); });
  if (s.ok()) CheckGrowth(call);
  return Agree(s, call);
}

absl::Status SpmdCollective::CaptureEnded() {
  if (closed_) return absl::OkStatus();
  absl::Status s = absl::OkStatus();
  if (plugin_->graph_captured != nullptr) {
    s = OnEveryRank("graph_captured", [&](int r) { return plugin_->graph_captured(states_[r]); });
  }
  // What the capture's calls and their registration hold (reserved ranges, mappings of the
  // peers' graph buffers) lives as long as the graph: the new baseline, not growth per call.
  for (int r : here_) growth_[r].Start(ranks_[r]->held().total());
  return Agree(s, "graph_captured");
}

absl::Status SpmdCollective::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  absl::Status s = absl::OkStatus();
  // A rank whose create failed has no state to destroy. destroy frees the state whatever it
  // returns: forget it before the codes are read, so a failure's message comes from the rank's
  // own log, not from the freed state's last_error.
  const auto destroy = [&](int r) {
    if (states_[r] == nullptr) return int32_t{DMALAB_OK};
    const int32_t code = plugin_->destroy(states_[r]);
    states_[r] = nullptr;
    return code;
  };
  if (thread_bootstrap_ == nullptr || !thread_bootstrap_->broken()) {
    // In a rank process a broken bootstrap fails its calls at once too: destroy runs as usual.
    s = OnEveryRank("destroy", destroy);
  } else {
    // The ranks lost step in a bootstrap deadlock. Each instance is still destroyed (its
    // bootstrap calls now fail at once, so none waits), lest its state leak; what destroy
    // returns says nothing the deadlock did not.
    threads_->Run([&](int r) {
      destroy(r);
      return absl::OkStatus();
    });
  }
  for (int r : here_) {
    if (ranks_[r]->held().total() == 0) continue;
    AddFinding("resource_leak", r,
               absl::StrFormat("plugin '%s' rank %d still holds after destroy: %s; an instance "
                               "releases what it created (allocations freed, mappings closed, "
                               "reserved ranges released, streams and events destroyed)",
                               plugin_->name, r, ranks_[r]->DescribeHeld()));
  }
  return Agree(s, "destroy");
}

DeviceFindings SpmdCollective::TakeFindings() {
  agreed_ = 0;
  return std::exchange(findings_, {});
}

}  // namespace dmalab

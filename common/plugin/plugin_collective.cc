#include "common/plugin/plugin_collective.h"

#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/core/status_macros.h"
#include "common/plugin/abi_convert.h"

namespace dmalab {
namespace {

constexpr int kMaxDims = 64;

PluginCollective* Self(void* ctx) { return static_cast<PluginCollective*>(ctx); }

MemRef ToMem(void* ctx, const dmalab_mem* m) { return Self(ctx)->FromPlugin(m); }

// Runs a device call for the plugin: DMALAB_OK, or DMALAB_ERROR with the message kept for
// last_error.
int32_t Result(void* ctx, const absl::Status& s) {
  if (s.ok()) return DMALAB_OK;
  Self(ctx)->SetError(s);
  return DMALAB_ERROR;
}

int32_t NullArgument(void* ctx, const char* function, const char* argument) {
  return Result(ctx, absl::InvalidArgumentError(
                         absl::StrFormat("%s: argument '%s' is NULL", function, argument)));
}

// --- dmalab_device_api: each forwards to the Device -------------------------------------------

const char* ApiLastError(void* ctx) { return Self(ctx)->last_device_error(); }

int32_t ApiAllocate(void* ctx, int32_t rank, uint64_t bytes, const char* tag, dmalab_mem* out) {
  if (out == nullptr) return NullArgument(ctx, "allocate", "out");
  absl::StatusOr<MemRef> m = Self(ctx)->device()->Allocate(rank, bytes, LabelFromAbi(tag));
  if (!m.ok()) return Result(ctx, m.status());
  Self(ctx)->Owned(*m, LabelFromAbi(tag));
  *out = MemToAbi(*m);
  return DMALAB_OK;
}

int32_t ApiFree(void* ctx, const dmalab_mem* allocation) {
  if (allocation == nullptr) return NullArgument(ctx, "free", "allocation");
  const MemRef m = ToMem(ctx, allocation);
  if (absl::Status s = Self(ctx)->ReleaseOwned(m); !s.ok()) return Result(ctx, s);
  return Result(ctx, Self(ctx)->device()->Free(m));
}

int32_t ApiComputeStream(void* ctx, int32_t rank, int32_t* stream) {
  if (stream == nullptr) return NullArgument(ctx, "compute_stream", "stream");
  Device* d = Self(ctx)->device();
  if (rank < 0 || rank >= d->world_size()) {
    return Result(ctx,
                  absl::InvalidArgumentError(absl::StrFormat(
                      "compute_stream: rank is %d; ranks are 0..%d", rank, d->world_size() - 1)));
  }
  *stream = d->ComputeStream(rank).value();
  return DMALAB_OK;
}

int32_t ApiCreateStream(void* ctx, int32_t rank, int32_t kind, const char* name, int32_t* stream) {
  if (stream == nullptr) return NullArgument(ctx, "create_stream", "stream");
  absl::StatusOr<StreamKind> k = StreamKindFromAbi(kind);
  if (!k.ok()) return Result(ctx, k.status());
  absl::StatusOr<StreamId> s = Self(ctx)->device()->CreateStream(rank, *k, LabelFromAbi(name));
  if (!s.ok()) return Result(ctx, s.status());
  *stream = s->value();
  return DMALAB_OK;
}

int32_t ApiCreateEvent(void* ctx, int32_t rank, int32_t* event) {
  if (event == nullptr) return NullArgument(ctx, "create_event", "event");
  absl::StatusOr<EventId> e = Self(ctx)->device()->CreateEvent(rank);
  if (!e.ok()) return Result(ctx, e.status());
  *event = e->value();
  return DMALAB_OK;
}

int32_t ApiRecordEvent(void* ctx, int32_t event, int32_t stream) {
  return Result(ctx, Self(ctx)->device()->RecordEvent(EventId(event), StreamId(stream)));
}

int32_t ApiWaitEvent(void* ctx, int32_t stream, int32_t event) {
  return Result(ctx, Self(ctx)->device()->WaitEvent(StreamId(stream), EventId(event)));
}

int32_t ApiCopy(void* ctx, int32_t stream, const dmalab_mem* dst, const dmalab_mem* src,
                const char* label) {
  if (dst == nullptr) return NullArgument(ctx, "copy", "dst");
  if (src == nullptr) return NullArgument(ctx, "copy", "src");
  return Result(ctx, Self(ctx)->device()->Copy(StreamId(stream), ToMem(ctx, dst), ToMem(ctx, src),
                                               LabelFromAbi(label)));
}

int32_t ApiReduce(void* ctx, int32_t stream, int32_t dtype, const dmalab_mem* dst,
                  const dmalab_mem* terms, int32_t n_terms, int64_t elems, const char* label) {
  if (dst == nullptr) return NullArgument(ctx, "reduce", "dst");
  if (terms == nullptr) return NullArgument(ctx, "reduce", "terms");
  absl::StatusOr<DType> t = DTypeFromAbi(dtype);
  if (!t.ok()) return Result(ctx, t.status());
  if (n_terms < 1 || n_terms > 64) {
    return Result(ctx, absl::InvalidArgumentError(
                           absl::StrFormat("reduce: n_terms is %d; allowed 1..64", n_terms)));
  }
  std::vector<Operand> operands;
  for (int32_t i = 0; i < n_terms; ++i) operands.push_back(Operand{ToMem(ctx, &terms[i])});
  return Result(ctx, Self(ctx)->device()->Reduce(StreamId(stream), *t, Operand{ToMem(ctx, dst)},
                                                 operands, elems, LabelFromAbi(label)));
}

int32_t ApiSignalFlag(void* ctx, int32_t stream, const dmalab_mem* counter,
                      const dmalab_mem* peer_flag, const char* label) {
  if (counter == nullptr) return NullArgument(ctx, "signal_flag", "counter");
  if (peer_flag == nullptr) return NullArgument(ctx, "signal_flag", "peer_flag");
  return Result(ctx, Self(ctx)->device()->SignalFlag(StreamId(stream), ToMem(ctx, counter),
                                                     ToMem(ctx, peer_flag), LabelFromAbi(label)));
}

int32_t ApiWaitFlag(void* ctx, int32_t stream, const dmalab_mem* expected, const dmalab_mem* flag,
                    const char* label) {
  if (expected == nullptr) return NullArgument(ctx, "wait_flag", "expected");
  if (flag == nullptr) return NullArgument(ctx, "wait_flag", "flag");
  return Result(ctx, Self(ctx)->device()->WaitFlag(StreamId(stream), ToMem(ctx, expected),
                                                   ToMem(ctx, flag), LabelFromAbi(label)));
}

int32_t ApiWriteValue(void* ctx, int32_t stream, const dmalab_mem* dst, uint64_t value,
                      const char* label) {
  if (dst == nullptr) return NullArgument(ctx, "write_value", "dst");
  return Result(ctx, Self(ctx)->device()->WriteValue(StreamId(stream), ToMem(ctx, dst), value,
                                                     LabelFromAbi(label)));
}

int32_t ApiWaitValue(void* ctx, int32_t stream, const dmalab_mem* flag, uint64_t value,
                     const char* label) {
  if (flag == nullptr) return NullArgument(ctx, "wait_value", "flag");
  return Result(ctx, Self(ctx)->device()->WaitValue(StreamId(stream), ToMem(ctx, flag), value,
                                                    LabelFromAbi(label)));
}

int32_t ApiWrite(void* ctx, const dmalab_mem* dst, const void* bytes, uint64_t n) {
  if (dst == nullptr) return NullArgument(ctx, "write", "dst");
  if (bytes == nullptr && n > 0) return NullArgument(ctx, "write", "bytes");
  return Result(
      ctx, Self(ctx)->device()->Write(ToMem(ctx, dst),
                                      absl::MakeConstSpan(static_cast<const uint8_t*>(bytes), n)));
}

int32_t ApiRead(void* ctx, const dmalab_mem* src, void* bytes, uint64_t n) {
  if (src == nullptr) return NullArgument(ctx, "read", "src");
  if (bytes == nullptr && n > 0) return NullArgument(ctx, "read", "bytes");
  return Result(ctx, Self(ctx)->device()->Read(ToMem(ctx, src),
                                               absl::MakeSpan(static_cast<uint8_t*>(bytes), n)));
}

int32_t ApiSynchronize(void* ctx) { return Result(ctx, Self(ctx)->device()->Synchronize()); }

int32_t ApiSupportsGraphs(void* ctx) { return Self(ctx)->device()->SupportsGraphs() ? 1 : 0; }

int32_t ApiCaptureGraph(void* ctx, int32_t (*body)(void* user), void* user, int32_t* graph) {
  if (body == nullptr) return NullArgument(ctx, "capture_graph", "body");
  if (graph == nullptr) return NullArgument(ctx, "capture_graph", "graph");
  absl::StatusOr<GraphId> g = Self(ctx)->device()->CaptureGraph([&]() -> absl::Status {
    if (body(user) == DMALAB_OK) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("capture_graph: the body failed: ", Self(ctx)->last_device_error()));
  });
  if (!g.ok()) return Result(ctx, g.status());
  *graph = g->value();
  return DMALAB_OK;
}

int32_t ApiLaunchGraph(void* ctx, int32_t graph) {
  return Result(ctx, Self(ctx)->device()->LaunchGraph(GraphId(graph)));
}

int32_t ApiIsCapturing(void* ctx) {
  Device* d = Self(ctx)->device();
  return d->IsCapturing(d->ComputeStream(0)) ? 1 : 0;
}

void* ApiNativeStream(void* ctx, int32_t stream) {
  return Self(ctx)->device()->NativeStream(StreamId(stream));
}

void* ApiNativePointer(void* ctx, const dmalab_mem* mem) {
  if (mem == nullptr) return nullptr;
  return Self(ctx)->device()->NativePointer(ToMem(ctx, mem));
}

int32_t ApiNativeDevice(void* ctx, int32_t rank) {
  return Self(ctx)->device()->NativeDeviceOrdinal(rank);
}

// A plugin's tensor descriptors for views: the structs and the shapes they point to.
struct Tensors {
  std::vector<dmalab_tensor> tensors;
  std::vector<std::vector<int64_t>> shapes;
};

absl::StatusOr<Tensors> Describe(absl::Span<const TensorView> views, std::string_view what) {
  Tensors t;
  t.tensors.resize(views.size());
  t.shapes.resize(views.size());
  for (size_t r = 0; r < views.size(); ++r) {
    const TensorView& v = views[r];
    if (v.shape.size() > kMaxDims) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s[%d] has %d dimensions; plugins take at most %d", what, r, v.shape.size(), kMaxDims));
    }
    if (!v.contiguous) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s[%d] is not contiguous; plugins take dense tensors", what, r));
    }
    t.shapes[r] = v.shape;
    dmalab_tensor& d = t.tensors[r];
    d.mem = MemToAbi(v.mem.Slice(0, v.bytes()));
    d.dtype = DTypeToAbi(v.dtype);
    d.ndim = static_cast<int32_t>(v.shape.size());
    d.elems = v.elems();
    d.shape = t.shapes[r].data();
  }
  return t;
}

}  // namespace

PluginCollective::PluginCollective(Device* device, std::unique_ptr<PluginLibrary> lib)
    : device_(device), lib_(std::move(lib)), plugin_(lib_->v1()) {}

PluginCollective::~PluginCollective() {
  if (state_ != nullptr) plugin_->destroy(state_);
}

absl::StatusOr<std::unique_ptr<PluginCollective>> PluginCollective::Load(
    Device* device, const PluginConfig& config) {
  DMALAB_ASSIGN_OR_RETURN(std::unique_ptr<PluginLibrary> lib, PluginLibrary::Open(config.path));
  return Create(device, std::move(lib), config);
}

absl::StatusOr<std::unique_ptr<PluginCollective>> PluginCollective::Create(
    Device* device, std::unique_ptr<PluginLibrary> lib, const PluginConfig& config) {
  if ((*lib).abi() != 1) {
    return lib->Error("it speaks plugin ABI v2 (SPMD): it is not a single-object v1 plugin");
  }
  std::unique_ptr<PluginCollective> p(new PluginCollective(device, std::move(lib)));
  DMALAB_RETURN_IF_ERROR(p->Bind(config));
  return p;
}

absl::Status PluginCollective::Close() {
  if (state_ == nullptr) return absl::OkStatus();
  plugin_->destroy(std::exchange(state_, nullptr));
  // What the plugin allocated and neither freed nor handed over is still held: a leak.
  std::map<int, std::vector<std::string>> held;
  for (const auto& [key, tag] : owned_) held[key.first].push_back(tag);
  for (const auto& [rank, tags] : held) {
    DeviceFinding f;
    f.checker = "resource_leak";
    f.rank = rank;
    f.detail = absl::StrFormat(
        "plugin '%s' still holds %d allocation(s) on rank %d after destroy: %s; a collective "
        "frees what it allocated (destroy at the latest)",
        plugin_->name, tags.size(), rank, absl::StrJoin(tags, ", "));
    findings_.findings.push_back(std::move(f));
  }
  owned_.clear();
  return absl::OkStatus();
}

DeviceFindings PluginCollective::TakeFindings() { return std::exchange(findings_, {}); }

absl::Status PluginCollective::Bind(const PluginConfig& config) {
  auto bad = [&](std::string_view why) { return lib_->Error(why); };
  api_.struct_size = sizeof(dmalab_device_api);
  api_.abi_version = DMALAB_PLUGIN_ABI_VERSION;
  api_.ctx = this;
  api_.world_size = device_->world_size();
  api_.backend = device_->name() == "sim" ? DMALAB_BACKEND_SIM : DMALAB_BACKEND_CUDA;
  api_.last_error = ApiLastError;
  api_.allocate = ApiAllocate;
  api_.free = ApiFree;
  api_.compute_stream = ApiComputeStream;
  api_.create_stream = ApiCreateStream;
  api_.create_event = ApiCreateEvent;
  api_.record_event = ApiRecordEvent;
  api_.wait_event = ApiWaitEvent;
  api_.copy = ApiCopy;
  api_.reduce = ApiReduce;
  api_.signal_flag = ApiSignalFlag;
  api_.wait_flag = ApiWaitFlag;
  api_.write_value = ApiWriteValue;
  api_.wait_value = ApiWaitValue;
  api_.write = ApiWrite;
  api_.read = ApiRead;
  api_.synchronize = ApiSynchronize;
  api_.supports_graphs = ApiSupportsGraphs;
  api_.capture_graph = ApiCaptureGraph;
  api_.launch_graph = ApiLaunchGraph;
  api_.is_capturing = ApiIsCapturing;
  api_.native_stream = ApiNativeStream;
  api_.native_pointer = ApiNativePointer;
  api_.native_device = ApiNativeDevice;

  dmalab_collective_config c{};
  c.struct_size = sizeof(c);
  c.world_size = device_->world_size();
  c.max_bytes = config.max_bytes;
  c.dtype = DTypeToAbi(config.dtype);
  c.options = config.options.c_str();
  void* state = nullptr;
  if (plugin_->create(&api_, &c, &state) != DMALAB_OK) {
    const std::string why = PluginError(state);
    if (state != nullptr) plugin_->destroy(state);
    return bad(absl::StrCat("create failed: ", why));
  }
  if (state == nullptr) return bad("create returned DMALAB_OK but no state");
  state_ = state;
  if (absl::Status s = TakeViolations("create"); !s.ok()) {
    return absl::InvalidArgumentError(s.message());
  }
  return absl::OkStatus();
}

std::string PluginCollective::name() const { return absl::StrCat("plugin:", plugin_->name); }

void PluginCollective::SetError(const absl::Status& s) { device_error_ = std::string(s.message()); }

void PluginCollective::Owned(const MemRef& mem, std::string_view tag) {
  owned_[{mem.rank, mem.addr}] = absl::StrFormat("'%s' (%d bytes)", tag, mem.bytes);
  origins_.Handed(mem);
}

MemRef PluginCollective::FromPlugin(const dmalab_mem* m) const {
  return origins_.Resolve(MemRef{m->rank, m->addr, m->bytes, m->alloc_id});
}

absl::Status PluginCollective::ReleaseOwned(const MemRef& mem) {
  if (owned_.erase({mem.rank, mem.addr}) > 0) return absl::OkStatus();
  std::string why = absl::StrFormat(
      "free of rank %d address 0x%x (%d bytes) refused: the plugin does not own it (it frees only "
      "allocations it made and has not handed over as default-form results)",
      mem.rank, mem.addr, mem.bytes);
  violations_.push_back(why);
  return absl::AbortedError(why);
}

std::string PluginCollective::PluginError(void* state) const {
  const char* e = plugin_->last_error(state);
  if (e == nullptr || e[0] == '\0') return "(the plugin's last_error gives no message)";
  return e;
}

absl::Status PluginCollective::TakeViolations(std::string_view call) {
  if (violations_.empty()) return absl::OkStatus();
  std::string text = absl::StrFormat("plugin '%s' broke the ABI's ownership rule in %s: %s",
                                     plugin_->name, call, absl::StrJoin(violations_, "; "));
  violations_.clear();
  return absl::AbortedError(text);
}

absl::StatusOr<std::vector<TensorView>> PluginCollective::AllReduce(
    absl::Span<const TensorView> inputs) {
  const std::string call = absl::StrFormat("all_reduce call %d (default form)", ++calls_);
  if (state_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrFormat("%s: the collective was closed", call));
  }
  if (static_cast<int>(inputs.size()) != device_->world_size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %d inputs for %d ranks", call, inputs.size(), device_->world_size()));
  }
  DMALAB_ASSIGN_OR_RETURN(Tensors in, Describe(inputs, "inputs"));
  for (const TensorView& v : inputs) origins_.Handed(v.mem);
  std::vector<dmalab_mem> results(inputs.size());
  if (plugin_->all_reduce(state_, in.tensors.data(), results.data()) != DMALAB_OK) {
    DMALAB_RETURN_IF_ERROR(TakeViolations(call));
    return absl::InvalidArgumentError(
        absl::StrFormat("plugin '%s' failed %s: %s", plugin_->name, call, PluginError(state_)));
  }
  DMALAB_RETURN_IF_ERROR(TakeViolations(call));
  std::vector<TensorView> outs;
  for (size_t r = 0; r < inputs.size(); ++r) {
    const MemRef m = FromPlugin(&results[r]);
    if (m.rank != static_cast<int>(r) || m.bytes < inputs[r].bytes()) {
      return absl::AbortedError(absl::StrFormat(
          "plugin '%s' %s: result %d is rank %d, %d bytes; it must be on rank %d and hold %d "
          "bytes",
          plugin_->name, call, r, m.rank, m.bytes, r, inputs[r].bytes()));
    }
    // The caller owns the result from now on.
    owned_.erase({m.rank, m.addr});
    outs.push_back(TensorView{m, inputs[r].dtype, inputs[r].shape, true});
  }
  return outs;
}

absl::Status PluginCollective::AllReduce(absl::Span<const TensorView> inputs,
                                         absl::Span<const TensorView> outs) {
  const std::string call = absl::StrFormat("all_reduce call %d (explicit form)", ++calls_);
  if (state_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrFormat("%s: the collective was closed", call));
  }
  if (static_cast<int>(inputs.size()) != device_->world_size() || outs.size() != inputs.size()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %d inputs and %d outs for %d ranks",
                                                      call, inputs.size(), outs.size(),
                                                      device_->world_size()));
  }
  DMALAB_ASSIGN_OR_RETURN(Tensors in, Describe(inputs, "inputs"));
  DMALAB_ASSIGN_OR_RETURN(Tensors out, Describe(outs, "outs"));
  for (const TensorView& v : inputs) origins_.Handed(v.mem);
  for (const TensorView& v : outs) origins_.Handed(v.mem);
  if (plugin_->all_reduce_into(state_, in.tensors.data(), out.tensors.data()) != DMALAB_OK) {
    DMALAB_RETURN_IF_ERROR(TakeViolations(call));
    return absl::InvalidArgumentError(
        absl::StrFormat("plugin '%s' failed %s: %s", plugin_->name, call, PluginError(state_)));
  }
  return TakeViolations(call);
}

}  // namespace dmalab

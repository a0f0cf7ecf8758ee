// The built-in DMA ring all-reduce as an ABI v2 plugin: one instance per rank, as it would run
// with one process per GPU. The ring core (common/ring/dma_all_reduce.h) is unchanged: it runs
// on a LockstepDevice (common/spmd/lockstep_device.h) over this rank's device table, so every
// instance follows the whole ring's calls and carries out its own rank's; a peer's scratch and
// flags are reached through IPC mappings that the instances exchange over the bootstrap the
// first time a copy or a signal needs them. Its sums are the built-in ring's, bit for bit.
//
// --collective-options: space-separated key=value pairs:
//   pieces=N       pieces per chunk (default 2, as the built-in ring)
//   inject=NAMES   the ring's fault injections, comma-separated (e.g. persistent-output)
// The wire is the scenario's dtype (the device table reduces plain elements only).
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/plugin/abi_convert.h"
#include "common/ring/dma_all_reduce.h"
#include "common/spmd/lockstep_device.h"
#include "common/spmd/rank_api_device.h"
#include "dmalab/plugin.h"

namespace dmalab {
namespace {

struct Instance {
  Instance(const dmalab_rank_api* api, const dmalab_bootstrap* bootstrap)
      : local(api),
        exchange(
            api->rank, api->world_size,
            [bootstrap](absl::Span<const uint8_t> send, absl::Span<uint8_t> recv) {
              if (bootstrap->allgather(bootstrap->ctx, send.data(), recv.data(), send.size()) !=
                  DMALAB_OK) {
                return absl::InternalError("the bootstrap's allgather failed");
              }
              return absl::OkStatus();
            },
            [bootstrap] {
              if (bootstrap->barrier(bootstrap->ctx) != DMALAB_OK) {
                return absl::InternalError("the bootstrap's barrier failed");
              }
              return absl::OkStatus();
            }),
        device(&local, api->rank, &exchange, local.name()) {}

  RankApiDevice local;
  AllGatherExchange exchange;
  LockstepDevice device;
  std::unique_ptr<DmaAllReduce> ring;
  std::string error;
};

int32_t Fail(Instance* inst, const absl::Status& s) {
  inst->error = std::string(s.message());
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
      return DMALAB_ERROR_BAD_ARGUMENT;
    case absl::StatusCode::kUnimplemented:
      return DMALAB_ERROR_UNSUPPORTED;
    default:
      return DMALAB_ERROR_INTERNAL;
  }
}

absl::Status ParseOptions(const char* text, DmaAllReduceOptions* options) {
  if (text == nullptr) return absl::OkStatus();
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipWhitespace())) {
    const std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(word, '=');
    if (kv.first == "pieces") {
      if (!absl::SimpleAtoi(kv.second, &options->pieces)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("option pieces=%s: not an integer", kv.second));
      }
    } else if (kv.first == "inject") {
      absl::StatusOr<FaultSet> faults =
          FaultSet::Parse(std::string_view(kv.second.data(), kv.second.size()));
      if (!faults.ok()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("option inject=%s: %s", kv.second, faults.status().message()));
      }
      options->faults = *faults;
    } else {
      return absl::InvalidArgumentError(absl::StrFormat(
          "option '%s': unknown; allowed: pieces=N, inject=NAMES (comma-separated)", word));
    }
  }
  return absl::OkStatus();
}

TensorView ViewOf(const dmalab_tensor& t) {
  TensorView v;
  v.mem = MemRef{t.mem.rank, t.mem.addr, t.mem.bytes, t.mem.alloc_id, 0};
  v.dtype = DTypeFromAbi(t.dtype).value_or(DType::kBF16);
  v.shape.assign(t.shape, t.shape + t.ndim);
  v.contiguous = true;
  return v;
}

// Every rank's view of one call as this instance knows it: its own tensor, and for the others
// stand-ins of the same shape (their operations are followed, never run, here).
std::vector<TensorView> Views(const TensorView& mine, int rank, int world, uint64_t stand_in) {
  std::vector<TensorView> views(world, mine);
  for (int r = 0; r < world; ++r) {
    if (r == rank) continue;
    views[r].mem = MemRef{r, stand_in, mine.mem.bytes, 0, 0};
  }
  return views;
}

constexpr uint64_t kInputStandIn = 0x10000;
constexpr uint64_t kOutputStandIn = 0x20000000000ull;

int32_t Create(const dmalab_rank_api* api, const dmalab_bootstrap* bootstrap,
               const dmalab_rank_config* config, void** state) {
  auto inst = std::make_unique<Instance>(api, bootstrap);
  DmaAllReduceOptions options;
  options.max_bytes = config->max_bytes;
  // A failed create has no state to ask last_error of: it says why through the log.
  const auto failed = [&](const absl::Status& s) {
    if (config->log != nullptr) {
      config->log(config->log_ctx, DMALAB_LOG_ERROR, std::string(s.message()).c_str());
    }
    *state = nullptr;
    return Fail(inst.get(), s);
  };
  if (absl::Status s = ParseOptions(config->options, &options); !s.ok()) return failed(s);
  absl::StatusOr<std::unique_ptr<DmaAllReduce>> ring = DmaAllReduce::Create(&inst->device, options);
  if (!ring.ok()) return failed(ring.status());
  inst->ring = *std::move(ring);
  *state = inst.release();
  return DMALAB_OK;
}

int32_t Destroy(void* state) {
  auto* inst = static_cast<Instance*>(state);
  inst->ring.reset();  // synchronizes, closes the peers' mappings, frees this rank's slab
  delete inst;
  return DMALAB_OK;
}

int32_t AllReduce(void* state, const dmalab_tensor* input, dmalab_mem* result) {
  auto* inst = static_cast<Instance*>(state);
  const int rank = inst->device.rank(), world = inst->device.world_size();
  const std::vector<TensorView> inputs = Views(ViewOf(*input), rank, world, kInputStandIn);
  absl::StatusOr<std::vector<TensorView>> outs = inst->ring->AllReduce(inputs);
  if (!outs.ok()) return Fail(inst, outs.status());
  // Every rank's output leaves the device's books: this rank's is the caller's now.
  for (const TensorView& o : *outs) inst->device.HandOver(o.mem);
  *result = MemToAbi((*outs)[rank].mem);
  return DMALAB_OK;
}

int32_t AllReduceInto(void* state, const dmalab_tensor* input, const dmalab_tensor* out) {
  auto* inst = static_cast<Instance*>(state);
  const int rank = inst->device.rank(), world = inst->device.world_size();
  const TensorView in = ViewOf(*input), o = ViewOf(*out);
  const bool in_place = in.mem.addr == o.mem.addr;
  const std::vector<TensorView> inputs = Views(in, rank, world, kInputStandIn);
  const std::vector<TensorView> outs =
      Views(o, rank, world, in_place ? kInputStandIn : kOutputStandIn);
  if (absl::Status s = inst->ring->AllReduce(inputs, outs); !s.ok()) return Fail(inst, s);
  return DMALAB_OK;
}

const char* LastError(void* state) {
  return state == nullptr ? "create failed" : static_cast<Instance*>(state)->error.c_str();
}

const dmalab_plugin_v2 kPlugin = {
    sizeof(dmalab_plugin_v2),
    DMALAB_PLUGIN_ABI_VERSION_2,
    "ring_v2",
    Create,
    Destroy,
    AllReduce,
    AllReduceInto,
    LastError,
    nullptr,
};

}  // namespace
}  // namespace dmalab

extern "C" DMALAB_PLUGIN_EXPORT const dmalab_plugin_v2* dmalab_plugin_entry_v2(
    uint32_t host_abi_version) {
  return host_abi_version >= DMALAB_PLUGIN_ABI_VERSION_2 ? &dmalab::kPlugin : nullptr;
}

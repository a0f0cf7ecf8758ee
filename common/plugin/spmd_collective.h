// SpmdCollective: an ABI v2 plugin (include/dmalab/plugin.h) run as a Collective: one instance
// per rank, each with its own dmalab_rank_api (RankApi) and a bootstrap, the W instances driven
// as W host threads of control (RankThreads, interleaved by the device's seed), as W processes
// would drive them. A call of the Collective is one call of every rank's instance.
//
// Besides what the device checks, the host side reports what only it can see: a bootstrap call
// that some ranks never make (deadlock), what an instance still holds after destroy
// (resource_leak), and resources that grow call after call (resource_growth).
//
// In a rank process (one process per rank, common/plugin/spmd_process.h) the same class runs only
// its own rank's instance, on the calling thread, over the process's local device and the
// processes' bootstrap; the other ranks' instances are run by their own processes, which drive
// their copies of this collective through the same calls. What one rank's host sees (its call's
// outcome, its leaks and growth) is gathered over the bootstrap after every call and at Close,
// so every process returns the same status and holds the same findings, rank 0's report reading
// like the one-process one.
#ifndef DMALAB_COMMON_PLUGIN_SPMD_COLLECTIVE_H_
#define DMALAB_COMMON_PLUGIN_SPMD_COLLECTIVE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/core/collective.h"
#include "common/core/resource_growth.h"
#include "common/plugin/bootstrap.h"
#include "common/plugin/plugin_collective.h"
#include "common/plugin/plugin_library.h"
#include "common/plugin/rank_api.h"
#include "common/plugin/rank_threads.h"
#include "common/plugin/spmd_process.h"
#include "dmalab/device.h"

namespace dmalab {

class SpmdCollective : public Collective {
 public:
  // Creates every rank's instance on `device` (which must outlive it) from a library speaking
  // ABI v2. A create that fails, or a bootstrap deadlock in create, is InvalidArgument naming
  // the rank. With `process` (which outlives it too), this process runs one rank of `device`'s
  // W (a lockstep device): only that rank's instance is created here.
  static absl::StatusOr<std::unique_ptr<SpmdCollective>> Create(Device* device,
                                                                std::unique_ptr<PluginLibrary> lib,
                                                                const PluginConfig& config,
                                                                SpmdProcess* process = nullptr);
  ~SpmdCollective() override;

  std::string name() const override;
  absl::StatusOr<std::vector<TensorView>> AllReduce(absl::Span<const TensorView> inputs) override;
  absl::Status AllReduce(absl::Span<const TensorView> inputs,
                         absl::Span<const TensorView> outs) override;
  absl::Status CaptureEnded() override;
  absl::Status Close() override;
  DeviceFindings TakeFindings() override;

  // Its resource growth is its own (RankApi's books count mappings, streams and events too).
  bool TracksOwnGrowth() const override { return true; }

 private:
  SpmdCollective(Device* device, std::unique_ptr<PluginLibrary> lib, SpmdProcess* process);
  // Runs `call` on every rank's thread (in a rank process: on this thread, for its rank),
  // marking what each rank does for deadlock messages; returns the first failure, a deadlock
  // being a finding too.
  absl::Status OnEveryRank(std::string_view what, const std::function<int32_t(int rank)>& call);
  // In a rank process, every process at the end of `what`: gathers each rank's outcome (`local`
  // here) and the findings made since the last gathering; returns the lowest failing rank's
  // status, and leaves every rank's findings in rank order. Elsewhere returns `local`.
  absl::Status Agree(absl::Status local, std::string_view what);
  // The plugin's view of `v`, a tensor of rank `rank` run here: in a rank process its range on
  // the local device, labeled with the rank.
  absl::StatusOr<TensorView> Own(const TensorView& v) const;
  Bootstrap* bootstrap();
  absl::Status RankStatus(int rank, int32_t code, std::string_view what) const;
  void CheckGrowth(std::string_view call);
  void AddFinding(std::string checker, int rank, std::string detail);

  Device* device_;
  SpmdProcess* process_;                           // null: every rank runs here
  std::unique_ptr<RankDevice> rank_device_;        // a rank process's: the local device as its rank
  std::shared_ptr<struct SpmdContexts> contexts_;  // what the C tables point into
  std::unique_ptr<PluginLibrary> lib_;
  const dmalab_plugin_v2* plugin_;
  // One process: the ranks' host threads and their bootstrap. Null in a rank process.
  std::unique_ptr<RankThreads> threads_;
  std::unique_ptr<ThreadBootstrap> thread_bootstrap_;
  SpmdHost host_;
  std::vector<int> here_;                        // the ranks whose instances run here
  std::vector<std::unique_ptr<RankApi>> ranks_;  // by rank; null for a rank not run here
  std::vector<dmalab_bootstrap> bootstrap_tables_;
  std::vector<void*> states_;
  std::vector<std::string> deadlocks_;  // bootstrap deadlocks of the running call
  std::vector<ResourceGrowth> growth_;
  bool closed_ = false;
  int64_t calls_ = 0;
  DeviceFindings findings_;
  size_t agreed_ = 0;  // findings_[0, agreed_) were gathered from every rank
};

}  // namespace dmalab

#endif  // DMALAB_COMMON_PLUGIN_SPMD_COLLECTIVE_H_

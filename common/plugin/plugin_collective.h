// PluginCollective: a third-party all-reduce loaded from a shared library that speaks the C ABI
// of include/dmalab/plugin.h, run as a Collective on any Device.
//
// The adapter hands the plugin a dmalab_device_api whose functions forward to the Device, and
// keeps the books the ABI promises: which allocations the plugin owns (it may free only those;
// a default-form result passes to the caller), and the message of the last failed device call.
// Every way a plugin can fail to load (no such file, not a shared library, no entry symbol, an
// ABI version or table size mismatch, a missing entry point) and every error it returns is a
// Status naming the plugin's file, never a crash.
#ifndef DMALAB_COMMON_PLUGIN_PLUGIN_COLLECTIVE_H_
#define DMALAB_COMMON_PLUGIN_PLUGIN_COLLECTIVE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/core/collective.h"
#include "common/core/dtype.h"
#include "common/plugin/plugin_library.h"
#include "common/plugin/pointer_origins.h"
#include "dmalab/device.h"
#include "dmalab/plugin.h"

namespace dmalab {

struct PluginConfig {
  std::string path;     // the shared library
  std::string options;  // handed to the plugin as dmalab_collective_config.options
  uint64_t max_bytes = 0;
  DType dtype = DType::kBF16;
};

class PluginCollective : public Collective {
 public:
  // Loads the library, checks the ABI and creates the plugin's collective on `device` (which
  // must outlive it). Errors are InvalidArgument (bad input: exit status 2).
  static absl::StatusOr<std::unique_ptr<PluginCollective>> Load(Device* device,
                                                                const PluginConfig& config);
  // The same, for a library already opened (it must speak ABI v1).
  static absl::StatusOr<std::unique_ptr<PluginCollective>> Create(
      Device* device, std::unique_ptr<PluginLibrary> lib, const PluginConfig& config);
  ~PluginCollective() override;
  PluginCollective(const PluginCollective&) = delete;
  PluginCollective& operator=(const PluginCollective&) = delete;

  // "plugin:NAME" with the name the plugin reports.
  std::string name() const override;
  // A refusal by the plugin (it returned DMALAB_ERROR) is InvalidArgument; a broken ABI
  // promise (a result on the wrong rank or too small, a free of memory it does not own) is
  // Aborted: a finding against the plugin (common/core/collective.h).
  absl::StatusOr<std::vector<TensorView>> AllReduce(absl::Span<const TensorView> inputs) override;
  absl::Status AllReduce(absl::Span<const TensorView> inputs,
                         absl::Span<const TensorView> outs) override;
  // Destroys the plugin's object; what it still owns then is a resource_leak finding.
  absl::Status Close() override;
  DeviceFindings TakeFindings() override;

  // The adapter's side of dmalab_device_api (public for the C trampolines).
  Device* device() const { return device_; }
  void SetError(const absl::Status& s);
  const char* last_device_error() const { return device_error_.c_str(); }
  // Records an allocation the plugin made.
  void Owned(const MemRef& mem, std::string_view tag);
  // A range the plugin passed, with a raw address resolved to its origin (PointerOrigins).
  MemRef FromPlugin(const dmalab_mem* m) const;
  // The plugin frees `mem`: OK only for an allocation it owns (then no longer); otherwise the
  // violation is recorded and reported by the call that made it.
  absl::Status ReleaseOwned(const MemRef& mem);

 private:
  PluginCollective(Device* device, std::unique_ptr<PluginLibrary> lib);
  absl::Status Bind(const PluginConfig& config);
  // The plugin's last_error for `state`, or a placeholder when it gives none.
  std::string PluginError(void* state) const;
  // Ends a call: the violations the plugin made during it, if any, as an Aborted status.
  absl::Status TakeViolations(std::string_view call);

  Device* device_;
  std::unique_ptr<PluginLibrary> lib_;
  const dmalab_plugin* plugin_;
  void* state_ = nullptr;
  dmalab_device_api api_{};
  std::string device_error_;
  // Allocations the plugin owns: (rank, addr) -> "'tag' (bytes)".
  std::map<std::pair<int, uint64_t>, std::string> owned_;
  PointerOrigins origins_;
  DeviceFindings findings_;
  std::vector<std::string> violations_;
  int64_t calls_ = 0;
};

}  // namespace dmalab

#endif  // DMALAB_COMMON_PLUGIN_PLUGIN_COLLECTIVE_H_

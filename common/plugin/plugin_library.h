// PluginLibrary: a plugin's shared library, opened, its entry point found and its table checked
// against the ABIs this dmalab speaks (include/dmalab/plugin.h), as NCCL's plugin loaders do: the
// newest entry point first (dmalab_plugin_entry_v2, then v1's dmalab_plugin_entry); a table
// older and smaller than this dmalab's is accepted with its missing trailing fields absent
// (NULL); a plugin built for a newer major version is refused, naming both versions. Every way a
// library can fail to load is an InvalidArgument naming the file.
#ifndef DMALAB_COMMON_PLUGIN_PLUGIN_LIBRARY_H_
#define DMALAB_COMMON_PLUGIN_PLUGIN_LIBRARY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "dmalab/plugin.h"

namespace dmalab {

class PluginLibrary {
 public:
  static absl::StatusOr<std::unique_ptr<PluginLibrary>> Open(const std::string& path);
  ~PluginLibrary();
  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;

  const std::string& path() const { return path_; }
  // 1 or 2: the ABI the plugin speaks.
  int abi() const { return v1_ != nullptr ? 1 : 2; }
  // ABI v1: the plugin's table. ABI v2: a copy of its table, zero-extended to this dmalab's size.
  const dmalab_plugin* v1() const { return v1_; }
  const dmalab_plugin_v2* v2() const { return v1_ != nullptr ? nullptr : &v2_; }
  // "path: why", as every load error reads.
  absl::Status Error(std::string_view why) const;

 private:
  explicit PluginLibrary(std::string path) : path_(std::move(path)) {}
  absl::Status BindV1(void* entry);
  absl::Status BindV2(void* entry);

  std::string path_;
  void* handle_ = nullptr;
  const dmalab_plugin* v1_ = nullptr;
  dmalab_plugin_v2 v2_{};
};

}  // namespace dmalab

#endif  // DMALAB_COMMON_PLUGIN_PLUGIN_LIBRARY_H_

#include "common/plugin/plugin_library.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/core/status_macros.h"

namespace dmalab {
namespace {

// Entry points of ABI versions newer than this dmalab's, looked for to name them in the refusal.
constexpr int kNewestKnownAbi = 2;
constexpr int kNewerAbisLookedFor = 8;

template <typename Fn>
Fn AsFunction(void* sym) {
  Fn fn;
  static_assert(sizeof(fn) == sizeof(sym));
  std::memcpy(&fn, &sym, sizeof(fn));
  return fn;
}

}  // namespace

absl::Status PluginLibrary::Error(std::string_view why) const {
  return absl::InvalidArgumentError(absl::StrFormat("plugin %s: %s", path_, why));
}

PluginLibrary::~PluginLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

absl::StatusOr<std::unique_ptr<PluginLibrary>> PluginLibrary::Open(const std::string& path) {
  std::unique_ptr<PluginLibrary> lib(new PluginLibrary(path));
  dlerror();
  lib->handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->handle_ == nullptr) {
    const char* e = dlerror();
    return lib->Error(absl::StrCat("cannot load it: ", e != nullptr ? e : "dlopen failed"));
  }
  if (void* v2 = dlsym(lib->handle_, "dmalab_plugin_entry_v2")) {
    DMALAB_RETURN_IF_ERROR(lib->BindV2(v2));
    return lib;
  }
  if (void* v1 = dlsym(lib->handle_, "dmalab_plugin_entry")) {
    DMALAB_RETURN_IF_ERROR(lib->BindV1(v1));
    return lib;
  }
  for (int v = kNewestKnownAbi + 1; v <= kNewestKnownAbi + kNewerAbisLookedFor; ++v) {
    if (dlsym(lib->handle_, absl::StrFormat("dmalab_plugin_entry_v%d", v).c_str()) != nullptr) {
      return lib->Error(absl::StrFormat(
          "it was built for plugin ABI version %d (it exports dmalab_plugin_entry_v%d); this "
          "dmalab speaks versions 1 and %d: use a newer dmalab, or build the plugin against this "
          "dmalab's <dmalab/plugin.h>",
          v, v, kNewestKnownAbi));
    }
  }
  return lib->Error(
      "it does not export dmalab_plugin_entry: not a dmalab plugin (include <dmalab/plugin.h> "
      "and define dmalab_plugin_entry_v2, or v1's dmalab_plugin_entry)");
}

absl::Status PluginLibrary::BindV1(void* sym) {
  using Entry = const dmalab_plugin* (*)(uint32_t);
  const dmalab_plugin* p = AsFunction<Entry>(sym)(DMALAB_PLUGIN_ABI_VERSION);
  if (p == nullptr) {
    return Error(absl::StrFormat(
        "dmalab_plugin_entry(%d) returned NULL: the plugin refuses plugin ABI version %d, which "
        "this dmalab speaks (rebuild it against this dmalab's <dmalab/plugin.h>)",
        DMALAB_PLUGIN_ABI_VERSION, DMALAB_PLUGIN_ABI_VERSION));
  }
  if (p->abi_version != DMALAB_PLUGIN_ABI_VERSION) {
    return Error(absl::StrFormat(
        "it was built against plugin ABI version %d; this dmalab speaks version %d: rebuild it "
        "against this dmalab's <dmalab/plugin.h>",
        p->abi_version, DMALAB_PLUGIN_ABI_VERSION));
  }
  if (p->struct_size < sizeof(dmalab_plugin)) {
    return Error(absl::StrFormat(
        "its dmalab_plugin table is %d bytes; ABI version %d has %d: rebuild it against this "
        "dmalab's <dmalab/plugin.h>",
        p->struct_size, DMALAB_PLUGIN_ABI_VERSION, sizeof(dmalab_plugin)));
  }
  std::vector<std::string> missing;
  if (p->name == nullptr || p->name[0] == '\0') missing.push_back("name");
  if (p->create == nullptr) missing.push_back("create");
  if (p->destroy == nullptr) missing.push_back("destroy");
  if (p->all_reduce == nullptr) missing.push_back("all_reduce");
  if (p->all_reduce_into == nullptr) missing.push_back("all_reduce_into");
  if (p->last_error == nullptr) missing.push_back("last_error");
  if (!missing.empty()) {
    return Error(
        absl::StrFormat("its dmalab_plugin table has no %s (NULL); every field is required",
                        absl::StrJoin(missing, ", ")));
  }
  v1_ = p;
  return absl::OkStatus();
}

absl::Status PluginLibrary::BindV2(void* sym) {
  using Entry = const dmalab_plugin_v2* (*)(uint32_t);
  const dmalab_plugin_v2* p = AsFunction<Entry>(sym)(DMALAB_PLUGIN_ABI_VERSION_2);
  if (p == nullptr) {
    return Error(absl::StrFormat(
        "dmalab_plugin_entry_v2(%d) returned NULL: the plugin refuses plugin ABI version %d, "
        "the newest this dmalab speaks",
        DMALAB_PLUGIN_ABI_VERSION_2, DMALAB_PLUGIN_ABI_VERSION_2));
  }
  if (p->abi_version > DMALAB_PLUGIN_ABI_VERSION_2) {
    return Error(absl::StrFormat(
        "it was built for plugin ABI version %d; this dmalab speaks versions 1 and %d: use a "
        "newer dmalab, or build the plugin against this dmalab's <dmalab/plugin.h>",
        p->abi_version, DMALAB_PLUGIN_ABI_VERSION_2));
  }
  if (p->abi_version != DMALAB_PLUGIN_ABI_VERSION_2) {
    return Error(absl::StrFormat(
        "its dmalab_plugin_entry_v2 returned a table of ABI version %d; that entry point returns "
        "version %d tables (v1 plugins export dmalab_plugin_entry)",
        p->abi_version, DMALAB_PLUGIN_ABI_VERSION_2));
  }
  // An older, smaller table: the fields it lacks are absent (NULL).
  const size_t size = std::min<size_t>(p->struct_size, sizeof(dmalab_plugin_v2));
  if (size < offsetof(dmalab_plugin_v2, name) + sizeof(p->name)) {
    return Error(
        absl::StrFormat("its dmalab_plugin_v2 table is %d bytes: too small to hold even "
                        "its name",
                        p->struct_size));
  }
  std::memcpy(&v2_, p, size);
  v2_.struct_size = static_cast<uint32_t>(size);
  std::vector<std::string> missing;
  if (v2_.name == nullptr || v2_.name[0] == '\0') missing.push_back("name");
  if (v2_.create == nullptr) missing.push_back("create");
  if (v2_.destroy == nullptr) missing.push_back("destroy");
  if (v2_.all_reduce == nullptr) missing.push_back("all_reduce");
  if (v2_.all_reduce_into == nullptr) missing.push_back("all_reduce_into");
  if (v2_.last_error == nullptr) missing.push_back("last_error");
  if (!missing.empty()) {
    return Error(absl::StrFormat(
        "its dmalab_plugin_v2 table has no %s (NULL or beyond its %d bytes); all but "
        "graph_captured are required",
        absl::StrJoin(missing, ", "), p->struct_size));
  }
  return absl::OkStatus();
}

}  // namespace dmalab

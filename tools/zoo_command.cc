#include "tools/zoo_command.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/core/status_macros.h"
#include "common/plugin/open_collective.h"
#include "common/ring/dma_all_reduce.h"
#include "common/scenario/size_family.h"
#include "runner/ordered_parallel.h"
#include "runner/run_device.h"
#include "runner/seed_split.h"
#include "sim/sim_device.h"
#include "tools/exit_status.h"
#include "tools/progress.h"
#include "zoo/zoo.h"

namespace dmalab {

absl::StatusOr<std::string> FindZooRoot(const std::string& root) {
  const auto holds_zoo = [](const std::filesystem::path& dir) {
    std::error_code ec;
    for (const std::string& file : ZooScenarios()) {
      if (file.rfind("api:", 0) == 0) continue;
      if (!std::filesystem::is_regular_file(dir / file, ec)) return false;
    }
    return true;
  };
  std::vector<std::pair<std::string, std::string>> candidates;  // (folder, why)
  if (!root.empty()) {
    candidates.emplace_back(root, "--root");
  } else if (const char* env = std::getenv("DMALAB_ROOT"); env != nullptr && *env != '\0') {
    candidates.emplace_back(env, "$DMALAB_ROOT");
  } else {
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
      candidates.emplace_back((exe.parent_path() / ".." / "share" / "dmalab").lexically_normal(),
                              "the install prefix");
      // Not <bin>/../.., whose normal form ends in a separator ("ROOT//scenarios/..." in
      // messages).
      candidates.emplace_back(exe.parent_path().parent_path().parent_path().string(),
                              "above the executable's folder");
    }
#ifdef DMALAB_SOURCE_DIR
    candidates.emplace_back(DMALAB_SOURCE_DIR, "the source tree it was built from");
#endif
    candidates.emplace_back(std::filesystem::current_path(ec).string(), "the current directory");
  }
  std::vector<std::string> looked;
  for (const auto& [dir, why] : candidates) {
    if (holds_zoo(dir)) return dir;
    looked.push_back(absl::StrFormat("%s (%s)", dir, why));
  }
  return absl::NotFoundError(absl::StrFormat(
      "cannot find the zoo's scenarios (%s and %d more files); looked in: %s; pass --root=DIR "
      "or set DMALAB_ROOT to a folder holding scenarios/ and tests/zoo/ (the source tree, or an "
      "install's share/dmalab)",
      ZooScenarios().front(), ZooScenarios().size() - 2, absl::StrJoin(looked, ", ")));
}

absl::Status WriteSizeFamily(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return absl::InvalidArgumentError(absl::StrFormat("cannot create '%s': %s", dir, ec.message()));
  for (const SizeFamilyMember& m : SizeFamily()) {
    const std::string path =
        (std::filesystem::path(dir) / std::filesystem::path(m.file).filename()).string();
    DMALAB_RETURN_IF_ERROR(WriteTextFile(path, m.yaml));
  }
  return absl::OkStatus();
}

namespace {

// The zoo's options from the flags, its size family written and its files found; an error is bad
// input.
absl::StatusOr<ZooOptions> OptionsOf(const ZooCommand& command) {
  ZooOptions options;
  options.seeds = command.seeds;
  options.jobs = command.jobs > 0 ? command.jobs : AvailableCores();
  if (options.seeds < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--seeds is %d; must be >= 1", options.seeds));
  }
  absl::StatusOr<Fidelity> fidelity = ParseFidelity(command.fidelity);
  if (!fidelity.ok()) return Prefixed("--", fidelity.status());
  options.fidelity = *fidelity;
  DMALAB_RETURN_IF_ERROR(CheckCollectiveOptions(command.run, "zoo"));
  DMALAB_RETURN_IF_ERROR(Prefixed("--collective: ", CheckCollective(command.run.collective)));
  options.collective = command.run.collective;
  options.hang_seconds = command.hang_seconds;
  options.size_seeds = command.sizes;
  options.backend = command.backend;
  options.gpus = command.gpus;
  options.perturb = command.perturb;
  DeviceChoice choice;
  choice.backend = command.backend;
  choice.perturb_seed = command.perturb;
  DMALAB_RETURN_IF_ERROR(CheckDeviceChoice(choice));
  if (!command.write_sizes.empty()) {
    DMALAB_RETURN_IF_ERROR(Prefixed("--write-sizes: ", WriteSizeFamily(command.write_sizes)));
  }
  DMALAB_ASSIGN_OR_RETURN(options.root, FindZooRoot(command.root));
  // The example plugins lie where the executable's own tree puts them, never in another tree:
  // installed, <prefix>/lib/dmalab/plugins beside <prefix>/bin/dmalab and its share/dmalab
  // (cmake/dmalab_install_data.cmake); in a build tree, build/examples beside build/bin.
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path prefix = exe.parent_path().parent_path();
  std::error_code no_share;  // a build tree has no share/: not an error
  const bool installed = std::filesystem::is_directory(prefix / "share" / "dmalab", no_share);
  const std::filesystem::path plugins =
      installed ? prefix / "lib" / "dmalab" / "plugins" : prefix / "examples";
  if (options.collective != kRingCollective) {
    // The plugin under test replaces the ring; the example plugins' rows are left out.
  } else if (!ec && std::filesystem::exists(plugins / "persistent_workspace.so", ec)) {
    options.plugins_dir = plugins.string();
  } else {
    std::fprintf(stderr,
                 "dmalab zoo: the example plugins are not %s (no %s): their rows are left out "
                 "(%s)\n",
                 installed ? "installed" : "built",
                 (plugins / "persistent_workspace.so").string().c_str(),
                 installed ? "install a build that has the target example_plugins"
                           : "build the target example_plugins");
  }
  return options;
}

absl::StatusOr<int> Execute(const ZooCommand& command) {
  DMALAB_ASSIGN_OR_RETURN(ZooOptions options, OptionsOf(command));
  Progress progress("zoo", "runs", ProgressWanted(command.run.quiet));
  options.progress = [&progress](int64_t done, int64_t total) { progress.Update(done, total); };
  DMALAB_ASSIGN_OR_RETURN(const ZooReport report, RunZoo(options));
  progress.Clear();
  std::fputs(FormatZooReport(report, options).c_str(), stdout);
  if (!command.run.json.empty() && CurrentSeedSplit().rank == 0) {
    DMALAB_RETURN_IF_ERROR(Prefixed(
        "--json: ", WriteTextFile(command.run.json, FormatZooJson(report, options) + "\n")));
  }
  return report.pass() ? cli::kExitPass : cli::kExitFailed;
}

}  // namespace

int RunZooCommand(const ZooCommand& command) { return ExitStatus("zoo", Execute(command)); }

}  // namespace dmalab

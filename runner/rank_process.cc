#include "runner/rank_process.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"
#include "common/plugin/open_collective.h"
#include "common/plugin/plugin_library.h"
#include "common/plugin/socket_bootstrap.h"
#include "common/spmd/bootstrap_exchange.h"
#include "common/spmd/lockstep_device.h"
#include "common/spmd/lockstep_process.h"
#include "dmalab/hw.h"
#include "runner/launcher.h"

namespace dmalab {
namespace {

std::vector<std::string>& ProgramArguments() {
  static std::vector<std::string> args;
  return args;
}

// The process's connection to the other ranks: made once, serving every device the command
// makes (a replay per seed of --seeds).
struct Connection {
  RankEnv env;
  std::unique_ptr<SocketBootstrap> bootstrap;
};

absl::StatusOr<Connection*> Connect() {
  static Connection* connection = nullptr;
  static absl::Status failed;
  if (connection != nullptr) return connection;
  if (!failed.ok()) return failed;
  absl::StatusOr<RankEnv> env = RankEnvFromEnvironment();
  if (!env.ok()) {
    failed = env.status();
    return failed;
  }
  SocketBootstrapOptions o;
  o.rank = env->rank;
  o.world = env->world;
  o.address = env->bootstrap;
  absl::StatusOr<std::unique_ptr<SocketBootstrap>> b = SocketBootstrap::Connect(o);
  if (!b.ok()) {
    failed =
        Prefixed(absl::StrFormat("rank %d of %d: bootstrap: ", env->rank, env->world), b.status());
    return failed;
  }
  connection = new Connection{*env, *std::move(b)};  // lives as long as the process
  if (env->rank != 0) {
    // Rank 0 reports; the others' stdout goes nowhere (stderr stays, for their errors).
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) {
      std::fflush(stdout);
      ::dup2(null, STDOUT_FILENO);
      ::close(null);
    }
  }
  return connection;
}

class RankProcessDeviceImpl : public RankProcessDevice {
 public:
  RankProcessDeviceImpl(Connection* c, std::unique_ptr<Device> local)
      : connection_(c),
        local_(std::move(local)),
        exchange_(c->bootstrap.get()),
        lockstep_(local_.get(), 0, &exchange_, absl::StrFormat("cuda:%d-processes", c->env.world)),
        process_(&lockstep_, local_.get(), c->bootstrap.get()) {}

  Device* get() override { return &lockstep_; }
  SpmdProcess* process() override { return &process_; }
  int rank() const override { return connection_->env.rank; }
  absl::Status Spin(StreamId stream, uint64_t ns) override {
    const std::optional<StreamId> local = lockstep_.LocalStream(stream);
    if (!local.has_value()) return absl::OkStatus();
    return HwSpin(*local_, *local, ns);
  }

 private:
  Connection* connection_;
  std::unique_ptr<Device> local_;
  BootstrapExchange exchange_;
  LockstepDevice lockstep_;
  LockstepProcess process_;
};

}  // namespace

void SetProgramArguments(int argc, const char* const* argv) {
  ProgramArguments().assign(argv, argv + argc);
}

bool InRankProcess() { return std::getenv(kRankEnv) != nullptr; }

bool IsLeadProcess() {
  const char* rank = std::getenv(kRankEnv);
  return rank == nullptr || std::string_view(rank) == "0";
}

absl::Status CheckProcsCollective(const std::string& collective) {
  if (!IsPluginPath(collective)) return absl::OkStatus();
  DMALAB_ASSIGN_OR_RETURN(std::unique_ptr<PluginLibrary> lib, PluginLibrary::Open(collective));
  if (lib->abi() == 2) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "--procs with plugin %s: it speaks plugin ABI v%d, whose one instance drives every rank "
      "from one process; --procs runs the built-in ring or an ABI v2 (SPMD) plugin, one instance "
      "per rank process",
      collective, lib->abi()));
}

int LaunchRankProcesses(std::string_view command, int procs) {
  if (ProgramArguments().empty()) {
    std::fprintf(stderr, "dmalab %.*s: --procs: the command line was not recorded\n",
                 static_cast<int>(command.size()), command.data());
    return 2;
  }
  LaunchOptions o;
  o.argv = ProgramArguments();
  o.argv[0] = "/proc/self/exe";
  o.world = procs;
  o.finished_status = 1;  // a FAIL verdict is a finished rank
  absl::StatusOr<LaunchResult> r = LaunchRanks(o);
  if (!r.ok()) {
    std::fprintf(stderr, "dmalab %.*s: --procs=%d: %s\n", static_cast<int>(command.size()),
                 command.data(), procs, std::string(r.status().message()).c_str());
    return 2;
  }
  if (r->ok()) return r->ranks[0].exit_status;
  std::fprintf(stderr, "dmalab %.*s: --procs=%d: %s\n", static_cast<int>(command.size()),
               command.data(), procs, r->failure.c_str());
  const RankEnd& first = r->ranks[r->first_failure >= 0 ? r->first_failure : 0];
  return first.how == RankEnd::How::kExited && first.exit_status == 2 ? 2 : 1;
}

absl::StatusOr<std::unique_ptr<RankProcessDevice>> RankProcessDevice::Create(
    const Options& options) {
  DMALAB_ASSIGN_OR_RETURN(auto* c, Connect());
  const RankEnv& env = c->env;
  if (env.world != options.world) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d: launched as one of %d processes, but the run has %d ranks; start one process "
        "per rank",
        env.rank, env.world, options.world));
  }
  HwDeviceOptions hw;
  hw.stream_priority_seed = options.stream_priority_seed;
  hw.first_gpu = env.local_rank;
  absl::StatusOr<std::unique_ptr<Device>> local = CreateHwDevice(1, 1, hw);
  if (!local.ok()) return Prefixed(absl::StrFormat("rank %d: ", env.rank), local.status());
  return std::make_unique<RankProcessDeviceImpl>(c, *std::move(local));
}

}  // namespace dmalab

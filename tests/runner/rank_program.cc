// A rank process for launcher_test: reads what its launcher told it (RankEnvFromEnvironment)
// and behaves as its arguments say:
//   ok                 exit 0
//   env DIR            write "rank world local_rank bootstrap" to DIR/rank<r>.txt, exit 0
//   exit R CODE        rank R exits with CODE; the others wait to be ended
//   verdict R CODE     rank R exits with CODE at once; the others exit 0 a little later
//   segv R             rank R dies of SIGSEGV; the others wait to be ended
//   hang R             rank R never ends (until killed); the others exit 0
//   hang-hard R        as hang, but rank R ignores SIGTERM
//   allgather          connect the ranks' bootstrap and check many allgathers byte by byte
//   allgather-segv R   as allgather, but rank R dies of SIGSEGV after the first round
//   lockstep W         W processes run one lockstep device (common/spmd/lockstep_device.h) over
//                      a fake shared-memory device (shm_ipc_device.h): each rank copies its
//                      successor's buffer through an exchanged IPC handle; exit 0, 12 when not
//                      launched as W processes, 13 on a wrong byte or any error
//   lockstep-exit W R  as lockstep, but rank R exits with 3 after the allocations; the others
//                      exit 14 once their bootstrap named rank R (13 when it did not)
//   plugin W PATH CALLS OUT
//                      W processes run the ABI v2 plugin at PATH, one instance per process (its
//                      own rank's, common/plugin/spmd_process.h), over a lockstep device on the
//                      fake shared-memory device: CALLS all-reduces of fp32 small integers in
//                      turn default form, explicit form into another tensor (a size past the
//                      plugins' one-shot limit) and in place; after each every rank's output is
//                      compared with the sum computed here. Rank 0 writes the collective's
//                      findings to OUT, one "checker rank: detail" line each. Exit 0; 12 when
//                      not launched as W processes; 13 on a wrong element or a failed call; 2
//                      when the collective could not be created (the error on stderr)
//   replay W SCENARIO PATH OUT
//                      W processes replay SCENARIO with the ABI v2 plugin at PATH, one instance
//                      per process, on the same lockstep device: the replay engine as a --procs
//                      run drives it. Rank 0 writes the report's text to OUT. Exit 0 (whatever
//                      the verdict); 12 when not launched as W processes; 13 on an error
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "common/plugin/open_collective.h"
#include "common/plugin/socket_bootstrap.h"
#include "common/spmd/bootstrap_exchange.h"
#include "common/spmd/lockstep_device.h"
#include "common/spmd/lockstep_process.h"
#include "dmalab/device.h"
#include "dmalab/replay.h"
#include "dmalab/report.h"
#include "dmalab/scenario_loader.h"
#include "dmalab/tensor.h"
#include "runner/launcher.h"
#include "tests/runner/shm_ipc_device.h"

namespace {

// Long enough to outlast any test; the launcher ends it sooner.
void WaitToBeEnded() {
  for (int i = 0; i < 600; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

[[noreturn]] void Segfault() {
  // The default action, not a sanitizer's report: the launcher is to see the signal.
  ::signal(SIGSEGV, SIG_DFL);
  ::raise(SIGSEGV);
  ::_exit(99);
}

int AllGathers(const dmalab::RankEnv& env, int segv_rank) {
  dmalab::SocketBootstrapOptions o;
  o.rank = env.rank;
  o.world = env.world;
  o.address = env.bootstrap;
  o.connect_timeout = absl::Seconds(5);
  o.op_timeout = absl::Seconds(5);
  absl::StatusOr<std::unique_ptr<dmalab::SocketBootstrap>> b = dmalab::SocketBootstrap::Connect(o);
  if (!b.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", env.rank, b.status().ToString().c_str());
    return 1;
  }
  for (int round = 0; round < 20; ++round) {
    if (round == 1 && env.rank == segv_rank) Segfault();
    const size_t n = 1 + round * 97;
    std::vector<uint8_t> send(n), recv(n * env.world);
    for (size_t i = 0; i < n; ++i) send[i] = static_cast<uint8_t>(env.rank * 31 + round + i);
    if (absl::Status s = (*b)->AllGather(env.rank, send, absl::MakeSpan(recv)); !s.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", env.rank, s.ToString().c_str());
      return 1;
    }
    for (int r = 0; r < env.world; ++r) {
      for (size_t i = 0; i < n; ++i) {
        if (recv[r * n + i] != static_cast<uint8_t>(r * 31 + round + i)) {
          std::fprintf(stderr, "rank %d: round %d: wrong byte %zu of rank %d\n", env.rank, round, i,
                       r);
          return 2;
        }
      }
    }
  }
  return (*b)->Barrier(env.rank).ok() ? 0 : 1;
}

// The bytes rank r writes to its first buffer in the lockstep modes.
std::vector<uint8_t> Pattern(int r, size_t n) {
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>((r * 7 + i) & 0xff);
  return bytes;
}

// The steps of the lockstep modes, each an error naming where it failed. Every process makes the
// same calls in the same order; the lockstep device carries out only this process's rank's.
absl::Status LockstepSteps(const dmalab::RankEnv& env, int exit_rank) {
  constexpr uint64_t kBytes = 4096;
  const int w = env.world;
  dmalab::SocketBootstrapOptions o;
  o.rank = env.rank;
  o.world = w;
  o.address = env.bootstrap;
  o.connect_timeout = absl::Seconds(5);
  o.op_timeout = absl::Seconds(5);
  absl::StatusOr<std::unique_ptr<dmalab::SocketBootstrap>> b = dmalab::SocketBootstrap::Connect(o);
  if (!b.ok()) return b.status();
  dmalab::ShmIpcDevice shm;
  dmalab::BootstrapExchange exchange(b->get());
  dmalab::LockstepDevice dev(&shm, /*local_rank=*/0, &exchange, "lockstep-shm");

  // Each rank's first buffer (its pattern), then each rank's second (its successor's copy).
  std::vector<dmalab::MemRef> first(w), second(w);
  for (int r = 0; r < w; ++r) {
    absl::StatusOr<dmalab::MemRef> m = dev.Allocate(r, kBytes, "first");
    if (!m.ok()) return m.status();
    first[r] = *m;
  }
  for (int r = 0; r < w; ++r) {
    absl::StatusOr<dmalab::MemRef> m = dev.Allocate(r, kBytes, "second");
    if (!m.ok()) return m.status();
    second[r] = *m;
  }
  // The failure path: this rank dies with its buffers allocated, before any handle was asked
  // for; the others meet its absence at the first exchange of the copies.
  if (env.rank == exit_rank) ::_exit(3);

  // Only the owner's write lands (every process computes the same bytes).
  for (int r = 0; r < w; ++r) {
    if (absl::Status s = dev.Write(first[r], Pattern(r, kBytes)); !s.ok()) return s;
  }
  // Rank r's stream reads rank r+1's buffer: r+1 exports it, r opens it, here and now.
  for (int r = 0; r < w; ++r) {
    const std::string label = absl::StrFormat("copy to rank %d", r);
    if (absl::Status s = dev.Copy(dev.ComputeStream(r), second[r], first[(r + 1) % w], label);
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = dev.Synchronize(); !s.ok()) return s;
  // Each process mapped exactly its successor's first buffer (none when it is its own).
  const int mapped = w > 1 ? 1 : 0;
  if (dev.open_mappings() != mapped || shm.open_mappings() != mapped) {
    return absl::InternalError(
        absl::StrFormat("after the copies: %d mappings in the lockstep device, %d in the shm "
                        "device; expected %d",
                        dev.open_mappings(), shm.open_mappings(), mapped));
  }
  // Every process reads every rank's copy (the owner reads and broadcasts).
  for (int r = 0; r < w; ++r) {
    std::vector<uint8_t> got(kBytes);
    if (absl::Status s = dev.Read(second[r], absl::MakeSpan(got)); !s.ok()) return s;
    const int from = (r + 1) % w;
    const std::vector<uint8_t> want = Pattern(from, kBytes);
    for (size_t i = 0; i < kBytes; ++i) {
      if (got[i] != want[i]) {
        return absl::DataLossError(
            absl::StrFormat("rank %d's copy of rank %d's buffer: byte %d is %d, expected %d", r,
                            from, i, got[i], want[i]));
      }
    }
  }
  for (int r = 0; r < w; ++r) {
    if (absl::Status s = dev.Free(first[r]); !s.ok()) return s;
    if (absl::Status s = dev.Free(second[r]); !s.ok()) return s;
  }
  if (dev.open_mappings() != 0 || shm.open_mappings() != 0 || shm.LiveAllocations(0) != 0) {
    return absl::InternalError(absl::StrFormat(
        "after the frees: %d mappings in the lockstep device, %d in the shm device, %d "
        "allocations in the shm device; expected none",
        dev.open_mappings(), shm.open_mappings(), shm.LiveAllocations(0)));
  }
  return absl::OkStatus();
}

// Element i of rank r's input in call `call` of the plugin mode: a small integer, so that every
// sum is exact in fp32.
float Input(int call, int r, int64_t i) {
  return static_cast<float>((i * 7 + r * 13 + call * 5) % 17 - 8);
}

// The plugin mode's calls (see the top), each an error naming where it failed.
absl::Status PluginCalls(const dmalab::RankEnv& env, const std::string& path, int calls,
                         const std::string& out_path) {
  using dmalab::MemRef;
  using dmalab::TensorView;
  const int w = env.world;
  dmalab::SocketBootstrapOptions o;
  o.rank = env.rank;
  o.world = w;
  o.address = env.bootstrap;
  o.connect_timeout = absl::Seconds(5);
  o.op_timeout = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<dmalab::SocketBootstrap>> b = dmalab::SocketBootstrap::Connect(o);
  if (!b.ok()) return b.status();
  dmalab::ShmIpcDevice shm;
  dmalab::BootstrapExchange exchange(b->get());
  dmalab::LockstepDevice dev(&shm, /*local_rank=*/0, &exchange, "lockstep-shm");
  dmalab::LockstepProcess process(&dev, &shm, b->get());
  // Small: one-shot in the custom all-reduces; big: past their 512 KiB one-shot limit.
  const int64_t unit = 8 * w;
  const int64_t small = unit * 16;
  const int64_t big = (140000 + unit - 1) / unit * unit;
  dmalab::CollectiveParams params;
  params.max_bytes = static_cast<uint64_t>(big) * 4;
  params.dtype = dmalab::DType::kFP32;
  params.process = &process;
  absl::StatusOr<std::unique_ptr<dmalab::Collective>> ar =
      dmalab::OpenCollective(&dev, path, params);
  if (!ar.ok()) return ar.status();
  const auto tensors = [&](int64_t n, const char* tag) -> absl::StatusOr<std::vector<TensorView>> {
    std::vector<TensorView> v;
    for (int r = 0; r < w; ++r) {
      absl::StatusOr<MemRef> m = dev.Allocate(r, static_cast<uint64_t>(n) * 4, tag);
      if (!m.ok()) return m.status();
      v.push_back(TensorView{*m, dmalab::DType::kFP32, {n}, true});
    }
    return v;
  };
  for (int call = 0; call < calls; ++call) {
    const int form = call % 3;  // 0 default, 1 into another tensor, 2 in place
    const int64_t n = form == 1 ? big : small;
    absl::StatusOr<std::vector<TensorView>> in = tensors(n, "input");
    if (!in.ok()) return in.status();
    for (int r = 0; r < w; ++r) {
      std::vector<float> v(n);
      for (int64_t i = 0; i < n; ++i) v[i] = Input(call, r, i);
      const auto* bytes = reinterpret_cast<const uint8_t*>(v.data());
      if (absl::Status s = dev.Write((*in)[r].mem, absl::MakeConstSpan(bytes, n * 4)); !s.ok()) {
        return s;
      }
    }
    std::vector<TensorView> out;
    if (form == 0) {
      absl::StatusOr<std::vector<TensorView>> got = (*ar)->AllReduce(*in);
      if (!got.ok()) return got.status();
      out = *got;
    } else if (form == 1) {
      absl::StatusOr<std::vector<TensorView>> o = tensors(n, "output");
      if (!o.ok()) return o.status();
      out = *o;
      if (absl::Status s = (*ar)->AllReduce(*in, out); !s.ok()) return s;
    } else {
      out = *in;
      if (absl::Status s = (*ar)->AllReduce(*in, out); !s.ok()) return s;
    }
    if (absl::Status s = dev.Synchronize(); !s.ok()) return s;
    for (int r = 0; r < w; ++r) {
      std::vector<float> got(n);
      if (absl::Status s = dev.Read(out[r].mem.Slice(0, n * 4),
                                    absl::MakeSpan(reinterpret_cast<uint8_t*>(got.data()), n * 4));
          !s.ok()) {
        return s;
      }
      for (int64_t i = 0; i < n; ++i) {
        float want = 0;
        for (int q = 0; q < w; ++q) want += Input(call, q, i);
        if (got[i] != want) {
          return absl::DataLossError(absl::StrFormat(
              "call %d (form %d, %d elements): rank %d's element %d is %g, expected %g", call, form,
              n, r, i, got[i], want));
        }
      }
    }
    for (int r = 0; r < w; ++r) {
      if (absl::Status s = dev.Free((*in)[r].mem); !s.ok()) return s;
      if (form != 2) {
        if (absl::Status s = dev.Free(out[r].mem); !s.ok()) return s;
      }
    }
  }
  if (absl::Status s = (*ar)->Close(); !s.ok()) return s;
  const dmalab::DeviceFindings findings = (*ar)->TakeFindings();
  if (env.rank == 0) {
    std::ofstream f(out_path);
    for (const dmalab::DeviceFinding& d : findings.findings) {
      f << d.checker << " " << d.rank << ": " << d.detail << "\n";
    }
  }
  return absl::OkStatus();
}

int Plugin(const dmalab::RankEnv& env, int expected_world, const std::string& path, int calls,
           const std::string& out_path) {
  if (env.world != expected_world) {
    std::fprintf(stderr, "rank %d: launched as one of %d processes, the program expects %d\n",
                 env.rank, env.world, expected_world);
    return 12;
  }
  const absl::Status s = PluginCalls(env, path, calls, out_path);
  if (s.ok()) return 0;
  std::fprintf(stderr, "rank %d: %s\n", env.rank, s.ToString().c_str());
  return absl::StrContains(s.message(), "create failed") ? 2 : 13;
}

// The replay mode (see the top).
absl::Status ReplayScenario(const dmalab::RankEnv& env, const std::string& scenario_path,
                            const std::string& path, const std::string& out_path) {
  absl::StatusOr<dmalab::Scenario> scenario = dmalab::LoadScenarioFile(scenario_path);
  if (!scenario.ok()) return scenario.status();
  dmalab::SocketBootstrapOptions o;
  o.rank = env.rank;
  o.world = env.world;
  o.address = env.bootstrap;
  o.connect_timeout = absl::Seconds(5);
  o.op_timeout = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<dmalab::SocketBootstrap>> b = dmalab::SocketBootstrap::Connect(o);
  if (!b.ok()) return b.status();
  dmalab::ShmIpcDevice shm;
  dmalab::BootstrapExchange exchange(b->get());
  dmalab::LockstepDevice dev(&shm, /*local_rank=*/0, &exchange, "lockstep-shm");
  dmalab::LockstepProcess process(&dev, &shm, b->get());
  dmalab::ReplayOptions options;
  options.collective = path;
  options.spmd_process = &process;
  absl::StatusOr<dmalab::ReplayReport> report = dmalab::Replay(*scenario, &dev, options);
  if (!report.ok()) return report.status();
  if (env.rank == 0) std::ofstream(out_path) << dmalab::FormatReportText(*report);
  return absl::OkStatus();
}

// The lockstep modes: `expected_world` processes, of which rank `exit_rank` (if any) dies.
int Lockstep(const dmalab::RankEnv& env, int expected_world, int exit_rank) {
  if (env.world != expected_world) {
    std::fprintf(stderr, "rank %d: launched as one of %d processes, the program expects %d\n",
                 env.rank, env.world, expected_world);
    return 12;
  }
  const bool survivor = exit_rank >= 0 && env.rank != exit_rank;
  // A survivor exits only once the launcher ended it (SIGTERM, held pending until then): were it
  // to exit on its own, the launcher could find it ended in the same look as the rank that died,
  // and name the lower rank as the first failure.
  sigset_t term;
  ::sigemptyset(&term);
  ::sigaddset(&term, SIGTERM);
  if (survivor) ::sigprocmask(SIG_BLOCK, &term, nullptr);
  const absl::Status s = LockstepSteps(env, exit_rank);
  if (!survivor) {
    if (s.ok()) return 0;
    std::fprintf(stderr, "rank %d: %s\n", env.rank, s.ToString().c_str());
    return 13;
  }
  const std::string named = absl::StrFormat("rank %d closed its connection", exit_rank);
  if (s.ok() || !absl::StrContains(s.message(), named)) {
    std::fprintf(stderr, "rank %d: expected an error saying \"%s\", got %s\n", env.rank,
                 named.c_str(), s.ToString().c_str());
    return 13;
  }
  std::fprintf(stderr, "rank %d: %s\n", env.rank, s.ToString().c_str());
  // Bounded: a launcher that never ends it still sees it exit.
  const timespec limit{10, 0};
  ::sigtimedwait(&term, nullptr, &limit);
  return 14;
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<dmalab::RankEnv> env = dmalab::RankEnvFromEnvironment();
  if (!env.ok()) {
    std::fprintf(stderr, "rank_program: %s\n", env.status().ToString().c_str());
    return 10;
  }
  const std::string mode = argc > 1 ? argv[1] : "";
  const int target = argc > 2 ? std::atoi(argv[2]) : -1;
  const bool me = env->rank == target;
  if (mode == "ok") return 0;
  if (mode == "env" && argc > 2) {
    std::ofstream(std::string(argv[2]) + "/rank" + std::to_string(env->rank) + ".txt")
        << env->rank << " " << env->world << " " << env->local_rank << " " << env->bootstrap;
    return 0;
  }
  if (mode == "exit" && argc > 3) {
    if (me) return std::atoi(argv[3]);
    WaitToBeEnded();
    return 0;
  }
  if (mode == "verdict" && argc > 3) {
    if (me) return std::atoi(argv[3]);
    ::usleep(300 * 1000);  // the others finish later
    return 0;
  }
  if (mode == "segv") {
    if (me) Segfault();
    WaitToBeEnded();
    return 0;
  }
  if (mode == "hang" || mode == "hang-hard") {
    if (!me) return 0;
    if (mode == "hang-hard") ::signal(SIGTERM, SIG_IGN);
    WaitToBeEnded();
    return 0;
  }
  if (mode == "allgather") return AllGathers(*env, -1);
  if (mode == "allgather-segv") return AllGathers(*env, target);
  if (mode == "lockstep" && argc > 2) return Lockstep(*env, target, -1);
  if (mode == "lockstep-exit" && argc > 3) return Lockstep(*env, target, std::atoi(argv[3]));
  if (mode == "replay" && argc > 5) {
    if (env->world != target) {
      std::fprintf(stderr, "rank %d: launched as one of %d processes, the program expects %d\n",
                   env->rank, env->world, target);
      return 12;
    }
    const absl::Status s = ReplayScenario(*env, argv[3], argv[4], argv[5]);
    if (s.ok()) return 0;
    std::fprintf(stderr, "rank %d: %s\n", env->rank, s.ToString().c_str());
    return 13;
  }
  if (mode == "plugin" && argc > 5)
    return Plugin(*env, target, argv[3], std::atoi(argv[4]), argv[5]);
  std::fprintf(stderr, "rank_program: unknown mode \"%s\"\n", mode.c_str());
  return 11;
}

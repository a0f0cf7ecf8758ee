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
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/plugin/socket_bootstrap.h"
#include "tools/launcher.h"

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
  std::fprintf(stderr, "rank_program: unknown mode \"%s\"\n", mode.c_str());
  return 11;
}

// dmalab: the command line. Every command has its own flags (CLI11, one FlagSet per command):
// a flag another command takes is an error here, as is a malformed value; `dmalab CMD --help`
// lists a command's flags. Exit status everywhere: 0 PASS, 1 a check failed or an expectation
// was not met, 2 bad input or usage.
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/core/byte_size.h"
#include "common/core/dtype.h"
#include "common/core/enum_names.h"
#include "common/core/version.h"
#include "common/plugin/open_collective.h"
#include "common/ring/enum_names.h"
#include "common/ring/ring_planner.h"
#include "dmalab/faults.h"
#include "dmalab/wire.h"
#include "runner/ordered_parallel.h"
#include "runner/rank_process.h"
#include "runner/seed_split.h"
#include "sim/enum_names.h"
#include "tools/calibrate_command.h"
#include "tools/checked_stdout.h"
#include "tools/cli_flags.h"
#include "tools/command.h"
#include "tools/demo_command.h"
#include "tools/replay_command.h"
#include "tools/sweep_command.h"
#include "tools/zoo_command.h"

namespace dmalab {
namespace {

using cli::FlagSet;

constexpr char kUsage[] = R"(dmalab: a testbed for copy-engine (DMA) all-reduce collectives.

usage: dmalab <command> [flags]
       dmalab <command> --help      that command's flags
       dmalab --version

commands:
  replay     replay a scenario (scenarios/*.yaml) and check what a model relies on: retained
             values unchanged, no two live results sharing storage, ranks bit-identical
             e.g. dmalab replay scenarios/glm52_tp4_layer0_residual.yaml --inject=persistent-output
  demo       run the all-reduce on the simulator or the GPUs over a range of sizes: wrong
             elements against the exact sum, rank consistency, checker findings
             e.g. dmalab demo --ranks=4 --dtype=bf16 -b 1M -e 16M -f 4 --seed=1
  sweep      time the all-reduce over a range of sizes beside its speed of light (nccl-tests style)
             e.g. dmalab sweep --backend=sim --topology=scenarios/topologies/h200_virtual_ranks.yaml
                  --ranks=4 -b 1M -e 64M -f 2 -n 5 -w 1 -c 1 --csv=sweep.csv
  calibrate  measure this GPU through CudaDevice and write a topology YAML for the simulator
             e.g. dmalab calibrate --gpus=1 --ranks=4 --out=h200_calibrated.yaml
  zoo        run every fault injection against the zoo scenarios over seeds 1..N, and the correct
             implementation over the same seeds and every size regime: which checker caught each
             fault, false positives
             e.g. dmalab zoo --seeds=20
  plan       print the ring plan (every rank's operations) for one tensor size
             e.g. dmalab plan --ranks=4 --elems=4096 --pieces=2
  help       this text; `dmalab help <command>` is `dmalab <command> --help`

exit status: 0 PASS, 1 a check failed or an expectation was not met, 2 bad input or usage
)";

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

// A value one of the project's parsers must accept; its error says what is allowed.
template <typename Parse>
std::function<absl::Status(const std::string&)> Accepts(Parse parse) {
  return [parse](const std::string& text) { return parse(text).status(); };
}

// The flags of replay, zoo, sweep and demo (RunFlags): one line here per flag.
void AddRunFlags(FlagSet& f, RunFlags& run) {
  f.Text("--collective", &run.collective,
         "the collective under test: NAME (built in: ring) or PATH.so (a path without '/' is "
         "in the current folder)",
         CheckCollective)
      ->transform(CollectiveAsWritten);
  f.Text("--collective-options", &run.collective_options,
         "text handed to a plugin's create (dmalab_rank_config.options, v1's "
         "dmalab_collective_config.options); the plugin parses it");
  f.Text("--json", &run.json, "also write the results as JSON to this path (docs/json.md)");
  f.Switch("-q,--quiet", &run.quiet, "no progress line on stderr (it is drawn only on a terminal)");
}

// --timeout of replay and zoo: a plugin runs in a worker process (runner/isolated_run.h).
void AddTimeout(FlagSet& f, int* seconds) {
  f.Integer("--timeout", seconds, 1, 86400,
            "plugins: seconds one step may run before the collective counts as hung "
            "(collective_hang); the plugin runs in a worker process, so its crash or exit is a "
            "finding (collective_crash) too");
}

// Flags that mean something only for a plugin (--timeout): a usage error with the ring.
int OnlyForPlugins(FlagSet& f, const RunFlags& run, const std::vector<std::string>& names) {
  return f.OnlyWith("--collective=PLUGIN.so", IsPluginPath(run.collective), names);
}

// --jobs of replay and zoo: seeds run at once, one simulator per thread.
void AddJobs(FlagSet& f, int* jobs, const std::string& what) {
  f.Integer("--jobs", jobs, 1, 4096,
            what + " run at once on this many threads (the output is the same for any number)")
      ->default_str(absl::StrFormat("all cores: %d here", AvailableCores()));
}

void AddDType(FlagSet& f, std::string* dtype) {
  f.Text("--dtype", dtype, absl::StrCat("element type: ", kDTypes.Allowed()), Accepts(ParseDType))
      ->default_str(*dtype);
}
void AddWire(FlagSet& f, std::string* wire) {
  f.Text("--wire", wire, absl::StrCat("wire mode: ", kWireModes.Allowed()), Accepts(ParseWireMode))
      ->default_str(*wire);
}
void AddInject(FlagSet& f, std::string* inject) {
  f.Text("--inject", inject,
         absl::StrCat("faults to inject, comma-separated: ", kFaults.Allowed(), " (or none)"),
         Accepts(FaultSet::Parse));
}
void AddPieces(FlagSet& f, int* pieces) {
  f.Integer("--pieces", pieces, 1, kMaxPieces,
            "pieces per chunk (1 is used when a piece would be under 512 KiB)");
}
void AddRanks(FlagSet& f, int* ranks) {
  f.Integer("--ranks", ranks, kMinWorld, kMaxWorld, "number of ranks (world size)");
}
// --perturb=SEED (hw): the schedule perturbation's seed (measure/perturbing_device.h).
void AddPerturb(FlagSet& f, std::optional<uint64_t>* perturb) {
  f.app()
      .add_option_function<std::string>(
          "--perturb",
          [perturb](const std::string& text) {
            uint64_t v = 0;
            const std::string e = cli::CheckInteger<uint64_t>(text, 0, kU64Max, &v);
            if (!e.empty()) throw CLI::ValidationError("--perturb", e);
            *perturb = v;
          },
          "hw: perturb the schedule with this seed (spins before enqueued work, host pauses, "
          "stream priorities); a failing seed replays")
      ->type_name("SEED")
      ->default_str("none");
}
void AddBackend(FlagSet& f, std::string* backend, int* gpus) {
  f.Choice("--backend", backend, {"sim", "hw"}, "sim (CPU simulator) or hw (CUDA GPUs)");
  f.Integer("--gpus", gpus, 1, kMaxWorld, "hw: GPUs the ranks spread over");
}
void AddProcs(FlagSet& f, int* procs) {
  f.Integer("--procs", procs, 1, dmalab::kMaxProcs,
            "hw: one process per rank, N of them (N = the ranks), peers' memory through CUDA IPC; "
            "rank 0 prints the report");
}
void AddFidelity(FlagSet& f, std::string* fidelity) {
  f.Choice("--fidelity", fidelity, kFidelities.Names(),
           "simulator: values (real bytes and arithmetic) or shadow (no payload, only each "
           "byte's provenance: much faster, no numeric checks)");
}

int Replay(int argc, const char* const* argv) {
  ReplayCommand c;
  FlagSet f("replay",
            "Replays a scenario on the simulator or the GPU and checks retained values, pointer "
            "aliasing, rank consistency, exact sums and finite values after every step; prints "
            "one line per all-reduce, one line per distinct finding, an ERROR SUMMARY and the "
            "summary line.");
  f.app().add_option("FILE", c.file, "the scenario YAML")->required();
  AddBackend(f, &c.backend, &c.gpus);
  AddProcs(f, &c.procs);
  AddFidelity(f, &c.fidelity);
  f.app()
      .add_option_function<std::string>(
          "--seed",
          [&c](const std::string& text) {
            uint64_t v = 0;
            const std::string e = cli::CheckInteger<uint64_t>(text, 0, kU64Max, &v);
            if (!e.empty()) throw CLI::ValidationError("--seed", e);
            c.seed = v;
          },
          "simulator scheduling seed")
      ->type_name("N")
      ->default_str("the scenario's");
  AddInject(f, &c.inject);
  f.Text("--dump", &c.dump_dir,
         "write every tensor live after the last step as DIR/NAME.rankR.npy (float32)");
  AddPerturb(f, &c.perturb);
  AddPieces(f, &c.pieces);
  f.Integer("--seeds", &c.seeds, 0, 1000000,
            "replay N times and list the failing runs: scheduling seeds 1..N (sim), perturbation "
            "seeds P..P+N-1 with --perturb=P (hw); 0: one replay");
  f.Switch("--check-determinism", &c.check_determinism,
           "sim: replay one seed twice and compare the reports byte for byte");
  AddJobs(f, &c.jobs, "sim, with --seeds or --check-determinism: replays");
  AddTimeout(f, &c.hang_seconds);
  AddRunFlags(f, c.run);
  if (int rc = f.Parse(argc, argv); rc >= 0) return rc;
  if (int rc = f.OnlyWith("--seeds or --check-determinism", c.seeds > 0 || c.check_determinism,
                          {"--jobs"});
      rc >= 0) {
    return rc;
  }
  if (int rc = f.OnlyWith("--backend=hw", c.backend == "hw", {"--gpus", "--perturb", "--procs"});
      rc >= 0) {
    return rc;
  }
  if (int rc = f.NotBoth("--procs", "--gpus",
                         "with --procs each rank process drives one GPU: its local rank modulo "
                         "the GPUs it sees");
      rc >= 0) {
    return rc;
  }
  if (int rc = OnlyForPlugins(f, c.run, {"--timeout"}); rc >= 0) return rc;
  if (int rc = f.OnlyWith("--backend=sim", c.backend == "sim",
                          {"--seed", "--check-determinism", "--fidelity", "--jobs"});
      rc >= 0) {
    return rc;
  }
  if (int rc =
          f.NotBoth("--seeds", "--check-determinism",
                    "--seeds replays seeds 1..N once each, --check-determinism one seed twice");
      rc >= 0) {
    return rc;
  }
  return RunReplayCommand(c);
}

int Demo(int argc, const char* const* argv) {
  DemoCommand c;
  FlagSet f("demo",
            "Runs the all-reduce on the simulator or the GPUs over sizes b, b*f, ... up to e with "
            "integer inputs, and counts every element that differs from the exact sum.");
  AddBackend(f, &c.backend, &c.gpus);
  AddProcs(f, &c.procs);
  AddPerturb(f, &c.perturb);
  AddRanks(f, &c.ranks);
  AddDType(f, &c.dtype);
  AddWire(f, &c.wire);
  AddPieces(f, &c.pieces);
  f.Size("-b,--minbytes", &c.min_bytes, 1, kDemoMaxBytes, "smallest size per rank (K, M, G)");
  f.Size("-e,--maxbytes", &c.max_bytes, 1, kDemoMaxBytes, "largest size per rank");
  f.Integer("-f,--stepfactor", &c.factor, 2, 1 << 20, "size multiplication factor");
  f.Integer<uint64_t>("--seed", &c.seed, 0, kU64Max, "sim: scheduling seed");
  AddInject(f, &c.inject);
  AddRunFlags(f, c.run);
  if (int rc = f.Parse(argc, argv); rc >= 0) return rc;
  if (int rc = f.OnlyWith("--backend=hw", c.backend == "hw", {"--gpus", "--perturb", "--procs"});
      rc >= 0) {
    return rc;
  }
  if (int rc = f.NotBoth("--procs", "--gpus",
                         "with --procs each rank process drives one GPU: its local rank modulo "
                         "the GPUs it sees");
      rc >= 0) {
    return rc;
  }
  if (int rc = f.OnlyWith("--backend=sim", c.backend == "sim", {"--seed"}); rc >= 0) return rc;
  return RunDemoCommand(c);
}

int Sweep(int argc, const char* const* argv) {
  SweepCommand c;
  FlagSet f("sweep",
            "Times the all-reduce out of place and in place over sizes b, b*f, ... up to e "
            "beside its speed of light, one row per size (nccl-tests' all_reduce_perf columns; "
            "docs/bandwidth.md).");
  f.Choice("--backend", &c.backend, {"sim", "hw"}, "sim (timing model) or hw (CUDA GPUs)");
  AddFidelity(f, &c.fidelity);
  f.Text("--topology", &c.topology, "sim (required): topology YAML the timing model uses");
  AddRanks(f, &c.ranks);
  f.Integer("--gpus", &c.gpus, 1, kMaxWorld, "hw: GPUs the ranks spread over");
  AddProcs(f, &c.procs);
  constexpr uint64_t kMaxSweepBytes = 64ull << 30;
  f.Size("-b,--minbytes", &c.b, 1, kMaxSweepBytes, "smallest size per rank (K, M, G)");
  f.Size("-e,--maxbytes", &c.e, 1, kMaxSweepBytes, "largest size per rank");
  f.Integer("-f,--stepfactor", &c.f, 2, 1 << 20, "size multiplication factor");
  f.Integer("-n,--iters", &c.n, 1, 1000000, "timed calls per size and mode");
  f.Integer("-w,--warmup_iters", &c.w, 0, 1000000, "untimed calls before them");
  f.Integer("-c,--check", &c.c, 0, 1, "1: one more call on integer inputs, checked");
  f.Integer("-G,--cudagraph", &c.graph, 0, 1,
            "1: replay a captured graph per call (CUDA graphs on hw, simulator graphs on sim)");
  AddDType(f, &c.dtype);
  AddWire(f, &c.wire);
  AddPieces(f, &c.pieces);
  f.Integer<uint64_t>("--seed", &c.seed, 0, kU64Max, "sim: scheduling seed");
  f.Text("--csv", &c.csv, "also write the table as CSV to this path");
  SweepNcclJsonOption nccl;
  f.Text("-J,--output_file", &nccl.path,
         "also write the results as nccl-tests JSON to this path (as all_reduce_perf -J)");
  AddRunFlags(f, c.run);
  if (int rc = f.Parse(argc, argv); rc >= 0) return rc;
  if (int rc = f.OnlyWith("--backend=hw", c.backend == "hw", {"--gpus", "--procs"}); rc >= 0) {
    return rc;
  }
  if (int rc = f.NotBoth("--procs", "--gpus",
                         "with --procs each rank process drives one GPU: its local rank modulo "
                         "the GPUs it sees");
      rc >= 0) {
    return rc;
  }
  if (int rc =
          f.OnlyWith("--backend=sim", c.backend == "sim", {"--topology", "--seed", "--fidelity"});
      rc >= 0) {
    return rc;
  }
  nccl.args = {"dmalab"};
  for (int i = 0; i < argc; ++i) nccl.args.push_back(argv[i]);
  return RunSweepCommand(c, nccl);
}

int Calibrate(int argc, const char* const* argv) {
  CalibrateCommand c;
  FlagSet f("calibrate",
            "Measures GPU 0 through CudaDevice (copy, reduce and codec-kernel rates, host costs) "
            "and writes a topology YAML for the simulator's timing model.");
  f.Integer("--gpus", &c.gpus, 1, kMaxWorld, "GPUs the ranks spread over");
  AddRanks(f, &c.ranks);
  f.Text("--out", &c.out, "the topology YAML to write")->required();
  if (int rc = f.Parse(argc, argv); rc >= 0) return rc;
  std::vector<std::string> words = {"dmalab"};
  for (int i = 0; i < argc; ++i) words.push_back(argv[i]);
  c.command_line = absl::StrJoin(words, " ");
  return RunCalibrateCommand(c);
}

int Zoo(int argc, const char* const* argv) {
  ZooCommand c;
  FlagSet f("zoo",
            "Runs every fault injection against the scenarios that show it over seeds 1..N, and "
            "the correct implementation over the same seeds and the size-regime scenarios: which "
            "checker caught each fault first, and the false positives.");
  f.Integer("--seeds", &c.seeds, 1, 1000000,
            "runs per fault and scenario: scheduling seeds 1..N (sim), perturbation seeds "
            "P..P+N-1 with --perturb=P (hw)");
  f.Integer("--sizes", &c.sizes, 0, 1000000,
            "runs of each size-regime scenario (sizes/*.yaml, generated); 0 leaves them out");
  f.Text("--write-sizes", &c.write_sizes,
         "also write the size-regime scenarios to DIR (to replay one with dmalab replay)");
  AddBackend(f, &c.backend, &c.gpus);
  AddPerturb(f, &c.perturb);
  AddJobs(f, &c.jobs, "sim: runs");
  AddFidelity(f, &c.fidelity);
  f.Text("--root", &c.root,
         "folder holding scenarios/ and tests/zoo/ (default: $DMALAB_ROOT, else found next to "
         "the executable or its install prefix)");
  AddTimeout(f, &c.hang_seconds);
  AddRunFlags(f, c.run);
  if (int rc = f.Parse(argc, argv); rc >= 0) return rc;
  if (int rc = OnlyForPlugins(f, c.run, {"--timeout"}); rc >= 0) return rc;
  if (int rc = f.OnlyWith("--backend=hw", c.backend == "hw", {"--gpus", "--perturb"}); rc >= 0) {
    return rc;
  }
  if (int rc = f.OnlyWith("--backend=sim", c.backend == "sim", {"--fidelity", "--jobs"}); rc >= 0) {
    return rc;
  }
  return RunZooCommand(c);
}

int Plan(int argc, const char* const* argv) {
  PlanCommand c;
  FlagSet f("plan", "Prints the ring plan (every rank's operations) for one tensor size.");
  AddRanks(f, &c.ranks);
  f.Integer<int64_t>("--elems", &c.elems, 1, int64_t{1} << 40, "elements of the tensor");
  AddDType(f, &c.dtype);
  AddWire(f, &c.wire);
  AddPieces(f, &c.pieces);
  AddInject(f, &c.inject);
  f.Text("--json", &c.json, "also write the plan as JSON to this path (docs/json.md)");
  if (int rc = f.Parse(argc, argv); rc >= 0) return rc;
  return RunPlanCommand(c);
}

struct Command {
  const char* name;
  int (*run)(int argc, const char* const* argv);
};

constexpr Command kCommands[] = {{"replay", Replay},       {"demo", Demo}, {"sweep", Sweep},
                                 {"calibrate", Calibrate}, {"zoo", Zoo},   {"plan", Plan}};

const Command* FindCommand(std::string_view name) {
  for (const Command& c : kCommands) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

std::string CommandNames() {
  std::vector<std::string> names;
  for (const Command& c : kCommands) names.push_back(c.name);
  return absl::StrJoin(names, ", ");
}

}  // namespace
}  // namespace dmalab

namespace {

int Run(int argc, char** argv) {
  using dmalab::cli::kExitPass;
  using dmalab::cli::kExitUsage;
  if (argc < 2) {
    std::fputs(dmalab::kUsage, stderr);
    return kExitUsage;
  }
  const std::string first = argv[1];
  if (first == "--version") {
    std::printf("dmalab %s\n", dmalab::ToolVersion());
    return kExitPass;
  }
  if (first == "help" || first == "--help" || first == "-h") {
    if (argc == 2) {
      std::fputs(dmalab::kUsage, stdout);
      return kExitPass;
    }
    const dmalab::Command* c = dmalab::FindCommand(argv[2]);
    if (c == nullptr || argc > 3) {
      std::fprintf(stderr, "dmalab help: '%s' is not a command; commands: %s\n", argv[2],
                   dmalab::CommandNames().c_str());
      return kExitUsage;
    }
    const char* help_argv[] = {argv[2], "--help"};
    return c->run(2, help_argv);
  }
  const dmalab::Command* c = dmalab::FindCommand(first);
  if (c == nullptr) {
    std::fprintf(stderr, "dmalab: '%s' is not a command; commands: %s (run 'dmalab --help')\n",
                 first.c_str(), dmalab::CommandNames().c_str());
    return kExitUsage;
  }
  if (absl::Status s = dmalab::StartSeedSplit(first); !s.ok()) {
    std::fprintf(stderr, "dmalab %s: %s\n", first.c_str(), std::string(s.message()).c_str());
    return kExitUsage;
  }
  return c->run(argc - 1, argv + 1);
}

}  // namespace

int main(int argc, char** argv) {
  dmalab::CheckStdout();
  dmalab::SetProgramArguments(argc, argv);
  const int rc = dmalab::FinishSeedSplit(Run(argc, argv));
  const bool known = argc >= 2 && dmalab::FindCommand(argv[1]) != nullptr;
  return dmalab::FinishStdout(known ? absl::StrCat("dmalab ", argv[1]) : "dmalab", rc);
}

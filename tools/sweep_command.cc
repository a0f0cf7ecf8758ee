// RunSweepCommand (tools/sweep_command.h): argument parsing, the backend, the table, the files.
#include "tools/sweep_command.h"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/core/byte_size.h"
#include "common/core/status_macros.h"
#include "common/plugin/open_collective.h"
#include "common/ring/ring_planner.h"
#include "dmalab/hw.h"
#include "dmalab/replay.h"
#include "measure/sweep.h"
#include "measure/sweep_report.h"
#include "runner/host_memory.h"
#include "runner/rank_process.h"
#include "sim/sim_device.h"
#include "sim/topology.h"
#include "tools/command.h"
#include "tools/exit_status.h"
#include "tools/process_names.h"
#include "tools/progress.h"

namespace dmalab {
namespace {

absl::StatusOr<SweepOptions> ParseOptions(const SweepCommand& c) {
  SweepOptions o;
  DMALAB_ASSIGN_OR_RETURN(o.dtype, ParseDType(c.dtype));
  DMALAB_ASSIGN_OR_RETURN(o.wire, ParseWireMode(c.wire));
  if (c.n < 1 || c.w < 0 || (c.c != 0 && c.c != 1) || c.graph < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("-n is %d, -w %d, -c %d, -G %d; need n >= 1, w >= 0, c in {0, 1}, G >= 0",
                        c.n, c.w, c.c, c.graph));
  }
  if (c.b == 0 || c.b > c.e) {
    return absl::InvalidArgumentError(
        absl::StrFormat("-b is %d bytes and -e %d; need 0 < b <= e", c.b, c.e));
  }
  o.min_bytes = c.b;
  o.max_bytes = c.e;
  o.factor = c.f;
  o.iters = c.n;
  o.warmup = c.w;
  o.check = c.c == 1;
  o.graph = c.graph > 0;
  o.pieces = c.pieces;
  o.collective = c.run.collective;
  return o;
}

// "2025-01-31 12:00:00" in local time, as nccl-tests stamps its JSON.
std::string LocalTime() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &tm);
  return text;
}

// The "# Using devices" lines: each rank's process and host; the GPU (its CUDA ordinal, PCI
// address and name) on hardware, the topology's GPU of the rank on the simulator.
absl::Status DescribeDevices(const SweepCommand& c, const Topology& topology,
                             RankProcessDevice* rank_process, SweepContext& context) {
  std::vector<ProcessName> names(c.ranks, ThisProcessName());
  if (rank_process != nullptr) {  // --procs: every rank is its own process
    DMALAB_ASSIGN_OR_RETURN(names, GatherProcessNames(*rank_process->process()->bootstrap(),
                                                      rank_process->rank(), names[0]));
  }
  for (int r = 0; r < c.ranks; ++r) {
    SweepRankDevice d;
    d.rank = r;
    d.pid = names[r].pid;
    d.host = names[r].host;
    if (c.backend == "sim") {
      d.device = topology.rank_gpus[r];
      d.bus_id = "sim";
      d.info = absl::StrFormat("SimDevice, topology %s GPU %d", topology.name, d.device);
    } else {
      d.device = r * c.gpus / c.ranks;  // CudaDevice's rank placement
      DMALAB_ASSIGN_OR_RETURN(GpuProperties gpu, HwGpuProperties(d.device));
      d.bus_id = absl::StrFormat("%04x:%02x:%02x", gpu.pci_domain, gpu.pci_bus, gpu.pci_device);
      d.info = gpu.name;
    }
    context.devices.push_back(d);
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Execute(const SweepCommand& c, const SweepNcclJsonOption& nccl) {
  DMALAB_RETURN_IF_ERROR(CheckCollectiveOptions(c.run, "sweep"));
  DMALAB_RETURN_IF_ERROR(Prefixed("--collective: ", CheckCollective(c.run.collective)));
  DMALAB_ASSIGN_OR_RETURN(SweepOptions options, ParseOptions(c));
  if (c.ranks < kMinWorld || c.ranks > kMaxWorld) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--ranks is %d; must be in [%d, %d]", c.ranks, kMinWorld, kMaxWorld));
  }
  if (c.procs > 0) {
    if (c.backend != "hw") {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--procs=%d needs --backend=hw: it runs one process per GPU rank", c.procs));
    }
    if (c.procs != c.ranks) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--procs is %d and --ranks %d; --procs starts one process per rank", c.procs, c.ranks));
    }
    if (c.graph != 0) {
      return absl::InvalidArgumentError(
          "--procs with -G 1: graphs are captured in one process; each rank process captures "
          "only its own work (drop -G or --procs)");
    }
    if (!InRankProcess()) {
      DMALAB_RETURN_IF_ERROR(CheckProcsCollective(c.run.collective));
      return LaunchRankProcesses("sweep", c.procs);
    }
  }
  SweepContext context;
  context.backend = c.backend;
  context.ranks = c.ranks;
  if (c.backend == "sim") context.seed = c.seed;
  context.options = options;
  Topology topology;  // declared first: outlives the SimDevice that times on it
  std::unique_ptr<Device> device;
  std::unique_ptr<RankProcessDevice> rank_process;  // --procs: `device` is not owned here
  DeviceClock clock;
  SimDevice* sim = nullptr;
  DMALAB_ASSIGN_OR_RETURN(const Fidelity fidelity, ParseFidelity(c.fidelity));
  if (fidelity == Fidelity::kShadow && c.backend != "sim") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--fidelity=shadow needs --backend=sim; --backend is '%s', which holds values", c.backend));
  }
  if (c.backend == "sim") {
    if (c.topology.empty()) {
      return absl::InvalidArgumentError(
          "--backend=sim needs --topology=FILE (e.g. "
          "scenarios/topologies/h200_virtual_ranks.yaml): the timing model predicts the times");
    }
    // The simulator holds every rank's buffers in this process: refuse a sweep that cannot fit
    // rather than die in the allocator (the shadow fidelity holds no payload).
    if (fidelity == Fidelity::kValues) {
      DMALAB_ASSIGN_OR_RETURN(const uint64_t need, SweepMemoryBytes(options, c.ranks));
      if (const MemoryLimit limit = AvailableMemory(); need > limit.bytes) {
        return absl::ResourceExhaustedError(absl::StrFormat(
            "the largest size (-e %s) needs about %s of memory, more than the %s; use a smaller "
            "-e, fewer --ranks, or --fidelity=shadow (times only, no payload)",
            DescribeByteSize(c.e), BytesText(need), LimitText(limit)));
      }
    }
    DMALAB_ASSIGN_OR_RETURN(topology, LoadTopologyFile(c.topology));
    auto owned = std::make_unique<SimDevice>(c.ranks, c.seed, fidelity);
    DMALAB_RETURN_IF_ERROR(owned->SetTopology(&topology));
    sim = owned.get();
    clock = [sim] { return sim->now_us(); };
    device = std::move(owned);
    context.topology = c.topology;
  } else if (c.backend == "hw" && c.procs > 0) {
    RankProcessDevice::Options o;
    o.world = c.ranks;
    DMALAB_ASSIGN_OR_RETURN(rank_process, RankProcessDevice::Create(o));
    options.spmd_process = rank_process->process();
    clock = WallClock();  // rank 0's, across the barrier of every Synchronize
  } else if (c.backend == "hw") {
    DMALAB_ASSIGN_OR_RETURN(device, CreateHwDevice(c.ranks, c.gpus));
    clock = WallClock();
  } else {
    return absl::InvalidArgumentError(
        absl::StrFormat("--backend is '%s'; allowed sim, hw", c.backend));
  }
  Device* dev = rank_process != nullptr ? rank_process->get() : device.get();
  context.device = dev->name();
  context.gpus = c.backend == "sim" ? topology.gpus : c.gpus;
  context.args = nccl.args;
  context.start_time = LocalTime();
  DMALAB_RETURN_IF_ERROR(DescribeDevices(c, topology, rank_process.get(), context));

  // Refusals before the table header, so that a refused sweep prints nothing on stdout.
  DMALAB_RETURN_IF_ERROR(CheckSweepOptions(options, *dev));
  std::fputs(SweepTableHeader(context).c_str(), stdout);
  std::fflush(stdout);
  Progress progress("sweep", "sizes", ProgressWanted(c.run.quiet));
  SweepObserver observer;
  observer.progress = [&progress](int index, int total, uint64_t bytes, std::string_view phase) {
    progress.Update(index, total, absl::StrFormat("%s %s", DescribeByteSize(bytes), phase));
  };
  observer.row = [&](const SweepRow& row) {
    progress.Clear();
    std::fputs(SweepTableRow(row).c_str(), stdout);
    std::fflush(stdout);
  };
  absl::StatusOr<std::vector<SweepRow>> rows = RunSweep(*dev, clock, options, observer);
  progress.Clear();
  if (!rows.ok() && IsCollectiveFailure(rows.status()) &&
      !IsCollectiveCallBadInput(rows.status(), options.collective)) {
    // The ring or a plugin breaking while it runs, or a plugin's call failing, is the collective
    // failing a check, not bad input; the ring rejecting the sweep's arguments is (as in
    // replay).
    std::printf("# %s\n# status=FAIL\n", std::string(rows.status().message()).c_str());
    return cli::kExitFailed;
  }
  if (!rows.ok()) return rows.status();
  // A time that is not a finite positive number has no bandwidth: never printed as inf or nan,
  // nor written into JSON (the topology's bounds keep the timing model's times finite).
  for (const SweepRow& r : *rows) {
    for (double us : {r.out_of_place.time_us, r.in_place.time_us, r.sol_us}) {
      if (!std::isfinite(us) || us <= 0) {
        return absl::InternalError(absl::StrFormat(
            "the time measured at %s is %g us, not a finite positive number; no row is written",
            DescribeByteSize(r.bytes), us));
      }
    }
  }
  context.end_time = LocalTime();
  std::fputs(SweepTableFooter(context, *rows).c_str(), stdout);

  bool failed = false;
  int64_t wrong = 0;
  for (const SweepRow& r : *rows) {
    wrong += r.out_of_place.wrong.value_or(0) + r.in_place.wrong.value_or(0);
  }
  if (wrong > 0) {
    std::printf("# %lld wrong elements\n", static_cast<long long>(wrong));
    failed = true;
  }
  if (sim != nullptr && !sim->findings().empty()) {
    std::fputs(sim->findings().ToString().c_str(), stdout);
    failed = true;
  }
  // Each file the command line asked for, with its flag in errors.
  struct OutputFile {
    const char* flag;
    const std::string& path;
    std::string (*format)(const SweepContext&, absl::Span<const SweepRow>);
  };
  for (const OutputFile& out :
       {OutputFile{"--csv", c.csv, SweepCsv}, OutputFile{"--json", c.run.json, SweepJson},
        OutputFile{"-J", nccl.path, SweepNcclJson}}) {
    if (out.path.empty() || !IsLeadProcess()) continue;
    DMALAB_RETURN_IF_ERROR(Prefixed(absl::StrCat(out.flag, ": "),
                                    WriteTextFile(out.path, out.format(context, *rows))));
  }
  std::printf("# status=%s\n", failed ? "FAIL" : "PASS");
  return failed ? cli::kExitFailed : cli::kExitPass;
}

}  // namespace

int RunSweepCommand(const SweepCommand& c, const SweepNcclJsonOption& nccl) {
  return ExitStatus("sweep", Execute(c, nccl));
}

}  // namespace dmalab

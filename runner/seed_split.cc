#include "runner/seed_split.h"

#include <fcntl.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "common/core/byte_codec.h"
#include "runner/ordered_parallel.h"

#ifdef DMALAB_HAVE_MPI
#include <mpi.h>
#endif

namespace dmalab {
namespace {

SeedSplit& Split() {
  static SeedSplit split;
  return split;
}
#ifdef DMALAB_HAVE_MPI
bool& MpiStarted() {
  static bool started = false;
  return started;
}
#endif

// The world size a launcher announced (OpenMPI's mpirun, or a PMI launcher such as Slurm's
// srun); 1 when none did.
int LaunchedWorld() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* v = std::getenv(name);
    int n = 0;
    if (v != nullptr && absl::SimpleAtoi(v, &n) && n > 1) return n;
  }
  return 1;
}

}  // namespace

std::string JoinFields(const std::vector<std::string>& fields) {
  ByteWriter out;
  for (const std::string& f : fields) out.Str(f);
  return out.Take();
}

absl::StatusOr<std::vector<std::string>> SplitFields(std::string_view text) {
  std::vector<std::string> fields;
  ByteReader in(text);
  while (!in.at_end() && in.error().empty()) fields.push_back(in.Str());
  if (!in.error().empty()) return absl::DataLossError("a result's field is cut short");
  return fields;
}

absl::Status StartSeedSplit(std::string_view command) {
  const int world = LaunchedWorld();
  if (world <= 1) return absl::OkStatus();
#ifndef DMALAB_HAVE_MPI
  (void)command;  // every command is refused alike without MPI
  return absl::FailedPreconditionError(absl::StrFormat(
      "launched as one of %d MPI processes, but this dmalab was built without MPI: each would run "
      "the whole campaign; build with -DDMALAB_MPI=ON (Debian's libopenmpi-dev) to split seeds "
      "over the ranks",
      world));
#else
  if (command != "zoo" && command != "replay") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "launched as one of %d MPI processes: only zoo and replay --seeds split their runs over "
        "MPI ranks; run %s as one process",
        world, command));
  }
  if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) {
    return absl::UnavailableError("MPI_Init failed");
  }
  MpiStarted() = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &Split().rank);
  MPI_Comm_size(MPI_COMM_WORLD, &Split().size);
  if (Split().rank != 0) {
    // Rank 0 prints; the others' stdout goes nowhere (stderr stays, for their errors).
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) {
      std::fflush(stdout);
      ::dup2(null, STDOUT_FILENO);
      ::close(null);
    }
  }
  return absl::OkStatus();
#endif
}

const SeedSplit& CurrentSeedSplit() { return Split(); }

int FinishSeedSplit(int status) {
#ifdef DMALAB_HAVE_MPI
  if (MpiStarted()) {
    std::fflush(stdout);
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    MpiStarted() = false;
  }
#endif
  return status;
}

absl::Status RunSplit(int64_t n, int jobs, const std::function<std::string(int64_t)>& run,
                      const std::function<bool(int64_t, const std::string&)>& consume) {
  const SeedSplit& s = Split();
  std::vector<int64_t> mine;
  for (int64_t k = s.rank; k < n; k += s.size) mine.push_back(k);
  ByteWriter results;  // this rank's results in job order, each length-prefixed
  RunOrdered<std::string>(
      static_cast<int64_t>(mine.size()), jobs, [](int64_t i) { return i; },
      [&](int64_t i) { return run(mine[i]); },
      [&](int64_t, std::string& r) {
        results.Str(r);
        return Consumed::kContinue;
      });
  std::string buffer = results.Take();
  std::vector<std::string> from(s.size);  // by rank: its results
#ifdef DMALAB_HAVE_MPI
  if (s.size > 1) {
    long long bytes = static_cast<long long>(buffer.size());
    std::vector<long long> sizes(s.size);
    MPI_Gather(&bytes, 1, MPI_LONG_LONG, sizes.data(), 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    std::vector<int> counts(s.size), offsets(s.size);
    long long total = 0;
    bool fits = bytes <= INT_MAX;
    for (int r = 0; r < s.size; ++r) {
      offsets[r] = static_cast<int>(std::min<long long>(total, INT_MAX));
      counts[r] = static_cast<int>(std::min<long long>(sizes[r], INT_MAX));
      total += sizes[r];
    }
    // Every rank learns whether the gather fits (rank 0 alone knows the total).
    int ok = s.rank != 0 || total <= INT_MAX ? 1 : 0;
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!ok || !fits) {
      return absl::ResourceExhaustedError(
          "the runs' results exceed 2 GiB, more than one MPI gather carries; split the campaign");
    }
    std::string all(s.rank == 0 ? static_cast<size_t>(total) : 0, '\0');
    MPI_Gatherv(buffer.data(), static_cast<int>(bytes), MPI_CHAR, all.data(), counts.data(),
                offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
    if (s.rank != 0) return absl::OkStatus();
    for (int r = 0; r < s.size; ++r) from[r] = all.substr(offsets[r], counts[r]);
  } else {
    from[0] = std::move(buffer);
  }
#else
  from[0] = std::move(buffer);
#endif
  // Rank 0: each rank's results in its job order; take them in the jobs' order.
  std::vector<ByteReader> rest(from.begin(), from.end());
  for (int64_t k = 0; k < n; ++k) {
    ByteReader& in = rest[k % s.size];
    if (in.at_end()) return absl::DataLossError(absl::StrFormat("run %d's result is missing", k));
    const std::string result = in.Str();
    if (!in.error().empty()) {
      return absl::DataLossError(absl::StrFormat("run %d's result is cut short", k));
    }
    if (!consume(k, result)) break;
  }
  return absl::OkStatus();
}

}  // namespace dmalab

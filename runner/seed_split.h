// Seed campaigns across processes and machines: under `mpirun -np N`, `dmalab zoo` and
// `dmalab replay --seeds=S` split their runs over the N MPI ranks (run k goes to rank k mod N),
// rank 0 gathers every run's result and prints the same table, lines and JSON as one process
// would (apart from timing fields), and every rank exits with rank 0's status.
//
// Needs dmalab built with MPI (`-DDMALAB_MPI=ON`, Debian's OpenMPI). A dmalab built without it
// that finds itself launched by mpirun with N > 1 refuses (exit 2) instead of running the whole
// campaign N times. Other commands run as one process (refused under mpirun with N > 1).
//
// Results cross processes as strings: each command serializes what it consumes of a run.
#ifndef DMALAB_RUNNER_SEED_SPLIT_H_
#define DMALAB_RUNNER_SEED_SPLIT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dmalab {

// The MPI world this process belongs to: rank 0 of 1 when not launched by mpirun.
struct SeedSplit {
  int rank = 0;
  int size = 1;
};

// Sets up the split at the start of `command` (main calls it): under mpirun with N > 1 it
// initializes MPI (built with it) and sends the stdout of ranks other than 0 to /dev/null; an
// error (exit 2) when this build has no MPI, or `command` does not split its runs.
absl::Status StartSeedSplit(std::string_view command);
// The split StartSeedSplit found.
const SeedSplit& CurrentSeedSplit();
// Ends the split (main calls it with the command's exit status): every rank returns rank 0's
// status, and MPI is finalized.
int FinishSeedSplit(int status);

// Runs jobs 0..n-1 split over the ranks: this rank runs its own (k mod size == rank) with
// run(k), `jobs` at a time (runner/ordered_parallel.h), which returns the job's result
// serialized; rank 0 then gets every job's result, in job order, through consume(k, result)
// until consume returns false. Other ranks consume nothing. Every rank must call it at the same
// point. (Each rank runs all its jobs: whether a result ends a group is known only on rank 0.)
absl::Status RunSplit(int64_t n, int jobs, const std::function<std::string(int64_t)>& run,
                      const std::function<bool(int64_t, const std::string&)>& consume);

// Length-prefixed fields, for the serialized results.
std::string JoinFields(const std::vector<std::string>& fields);
absl::StatusOr<std::vector<std::string>> SplitFields(std::string_view text);

}  // namespace dmalab

#endif  // DMALAB_RUNNER_SEED_SPLIT_H_

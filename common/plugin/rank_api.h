// RankApi: one rank's dmalab_rank_api (include/dmalab/plugin.h, ABI v2) over a Device. It
// confines an instance to its rank (its own streams, events and memory; peers only through IPC
// mappings), keeps the books of what the instance holds (allocations, mappings, streams, events:
// leaks and growth are read from them), resolves raw addresses to their origin, and makes every
// call a point where another rank's host thread may run (RankThreads).
#ifndef DMALAB_COMMON_PLUGIN_RANK_API_H_
#define DMALAB_COMMON_PLUGIN_RANK_API_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/plugin/pointer_origins.h"
#include "common/plugin/rank_threads.h"
#include "dmalab/device.h"
#include "dmalab/plugin.h"

namespace dmalab {

// What the ranks of one SPMD collective share on the host.
struct SpmdHost {
  Device* device = nullptr;
  // The ranks' host threads in one process; null where each rank is a process of its own (its
  // one instance runs on the calling thread, and peers progress by themselves).
  RankThreads* threads = nullptr;
  // Bumped by every host call of any rank: a rank waiting for its device work to complete waits
  // for it to change (someone enqueued something) before it polls again.
  uint64_t epoch = 0;
};

// The resources an instance holds, counted.
struct HeldResources {
  int64_t allocations = 0, mappings = 0, streams = 0, events = 0, reservations = 0;
  int64_t total() const { return allocations + mappings + streams + events + reservations; }
};

class RankApi {
 public:
  RankApi(SpmdHost* host, int rank);
  RankApi(const RankApi&) = delete;
  RankApi& operator=(const RankApi&) = delete;

  const dmalab_rank_api* table() const { return &api_; }
  int rank() const { return rank_; }
  Device* device() const { return host_->device; }
  SpmdHost* host() const { return host_; }

  // dmalab hands the instance `m` (a call's tensor): raw addresses inside it resolve to it.
  void Handed(const MemRef& m) { origins_.Handed(m); }
  // A range the instance passed: on its own rank, a raw address resolved to its origin.
  absl::StatusOr<MemRef> FromPlugin(const dmalab_mem* m, std::string_view what) const;
  // The default form's result: it must be an allocation the instance owns; it passes to the
  // caller. Aborted (a broken contract) otherwise.
  absl::Status HandOver(const MemRef& result, std::string_view call);
  // Waits until every operation enqueued on this rank's streams has completed, letting the other
  // ranks' host threads run meanwhile; a deadlock when nobody can progress.
  absl::Status SyncRank();

  HeldResources held() const;
  // "2 allocations ('staging' 4096 bytes, 'flags' 512 bytes), 3 IPC mappings (...)".
  std::string DescribeHeld() const;
  // Contract violations (a free of memory it does not own) since the last call.
  std::vector<std::string> TakeViolations() { return std::exchange(violations_, {}); }

  // For the C trampolines.
  int32_t Done(const absl::Status& s);
  const char* last_error() const { return error_.c_str(); }
  void Step();  // a host call: bump the epoch, let another rank run
  absl::Status CheckStream(dmalab_stream s, std::string_view what) const;
  absl::Status CheckEvent(dmalab_event e, std::string_view what) const;

  // The books: start address -> "'tag' (bytes)" (allocations) or a description (mappings; a
  // device may place two mappings of one handle at one address, as CUDA does in one process).
  std::map<uint64_t, std::string> allocations;
  std::multimap<uint64_t, std::string> mappings;
  std::map<uint64_t, std::string> reservations;  // reserved address ranges, not released
  std::set<int32_t> streams;                     // created, not destroyed
  std::set<int32_t> events;                      // created or opened, not destroyed
  std::vector<std::string> violations_;

 private:
  SpmdHost* host_;
  int rank_;
  dmalab_rank_api api_{};
  PointerOrigins origins_;
  std::string error_;
};

}  // namespace dmalab

#endif  // DMALAB_COMMON_PLUGIN_RANK_API_H_

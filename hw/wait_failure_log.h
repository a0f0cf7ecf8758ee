// Where CudaDevice's bounded flag waits report that they gave up: a host-mapped pinned buffer
// the wait kernels write (kernels::WaitFailureRecord), per-GPU slot counters, and the host
// table of wait labels that records refer to by index. Synchronize turns the records into a
// Status such as
//   rank 2 stream flag: wait 'rs.k1.p0 wait' timed out after 10 s: flag=3 expected=4
#ifndef DMALAB_HW_WAIT_FAILURE_LOG_H_
#define DMALAB_HW_WAIT_FAILURE_LOG_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hw/kernels.h"

namespace dmalab {

// "10 s", "200 ms", "50 us" or "7 ns": the largest unit that divides `ns`.
std::string FormatDurationNs(uint64_t ns);

class WaitFailureLog {
 public:
  // Records kept per GPU; further failures are only counted.
  static constexpr uint32_t kRecordsPerGpu = 64;

  // `gpu_ordinals`: the CUDA devices the log serves (one slot counter on each).
  static absl::StatusOr<std::unique_ptr<WaitFailureLog>> Create(std::vector<int> gpu_ordinals);
  ~WaitFailureLog();
  WaitFailureLog(const WaitFailureLog&) = delete;
  WaitFailureLog& operator=(const WaitFailureLog&) = delete;

  // The index of `label` in the label table (added on first use).
  int32_t InternLabel(std::string_view label);
  const std::string& label(int32_t index) const { return labels_[index]; }

  // The log's part of a wait kernel's arguments for a wait on GPU `gpu_index` (an index into
  // gpu_ordinals, not a CUDA ordinal).
  void FillWaitArgs(int gpu_index, kernels::WaitFlagArgs& args) const;

  // Call only when every stream that runs wait kernels is synchronized. OK when no wait gave
  // up; otherwise DeadlineExceeded naming each timed-out wait (rank, stream, label, flag value
  // seen, expected value) and the waits abandoned after it; then clears the log, so that each
  // failure is reported once. `stream_name` names a StreamId.
  absl::Status TakeFailures(const std::function<std::string(int32_t)>& stream_name,
                            uint64_t timeout_ns);

 private:
  explicit WaitFailureLog(std::vector<int> gpu_ordinals);
  absl::Status Reset();

  std::vector<int> gpu_ordinals_;
  // Host-mapped pinned memory: the abort word, then kRecordsPerGpu records per GPU.
  void* host_ = nullptr;
  uint32_t* abort_ = nullptr;
  kernels::WaitFailureRecord* records_ = nullptr;
  std::vector<uint32_t*> record_counts_;  // device memory, one per GPU
  std::vector<std::string> labels_;
  absl::flat_hash_map<std::string, int32_t> label_index_;
};

}  // namespace dmalab

#endif  // DMALAB_HW_WAIT_FAILURE_LOG_H_

#include "hw/wait_failure_log.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/core/status_macros.h"
#include "hw/cuda_status.h"

namespace dmalab {
namespace {

// The abort word gets a cache line of its own, ahead of the records.
constexpr size_t kRecordsOffset = 64;

}  // namespace

std::string FormatDurationNs(uint64_t ns) {
  if (ns != 0 && ns % 1'000'000'000 == 0) return absl::StrFormat("%d s", ns / 1'000'000'000);
  if (ns != 0 && ns % 1'000'000 == 0) return absl::StrFormat("%d ms", ns / 1'000'000);
  if (ns != 0 && ns % 1'000 == 0) return absl::StrFormat("%d us", ns / 1'000);
  return absl::StrFormat("%d ns", ns);
}

WaitFailureLog::WaitFailureLog(std::vector<int> gpu_ordinals)
    : gpu_ordinals_(std::move(gpu_ordinals)) {}

absl::StatusOr<std::unique_ptr<WaitFailureLog>> WaitFailureLog::Create(
    std::vector<int> gpu_ordinals) {
  std::unique_ptr<WaitFailureLog> log(new WaitFailureLog(std::move(gpu_ordinals)));
  const size_t bytes = kRecordsOffset + sizeof(kernels::WaitFailureRecord) * kRecordsPerGpu *
                                            log->gpu_ordinals_.size();
  DMALAB_CUDA_RETURN_IF_ERROR(
      cudaHostAlloc(&log->host_, bytes, cudaHostAllocMapped | cudaHostAllocPortable),
      "flag wait log: pinned host buffer of %d bytes", bytes);
  std::memset(log->host_, 0, bytes);
  // With unified addressing the host pointer is also the device pointer, on every GPU.
  log->abort_ = static_cast<uint32_t*>(log->host_);
  log->records_ = reinterpret_cast<kernels::WaitFailureRecord*>(static_cast<uint8_t*>(log->host_) +
                                                                kRecordsOffset);
  for (int ordinal : log->gpu_ordinals_) {
    void* count = nullptr;
    DMALAB_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal), "flag wait log: GPU %d", ordinal);
    DMALAB_CUDA_RETURN_IF_ERROR(cudaMalloc(&count, sizeof(uint32_t)),
                                "flag wait log: slot counter on GPU %d", ordinal);
    log->record_counts_.push_back(static_cast<uint32_t*>(count));
    DMALAB_CUDA_RETURN_IF_ERROR(cudaMemset(count, 0, sizeof(uint32_t)),
                                "flag wait log: clear slot counter on GPU %d", ordinal);
  }
  return log;
}

WaitFailureLog::~WaitFailureLog() {
  for (size_t g = 0; g < record_counts_.size(); ++g) {
    cudaSetDevice(gpu_ordinals_[g]);
    cudaFree(record_counts_[g]);
  }
  if (host_ != nullptr) cudaFreeHost(host_);
}

int32_t WaitFailureLog::InternLabel(std::string_view label) {
  if (auto it = label_index_.find(absl::string_view(label.data(), label.size()));
      it != label_index_.end())
    return it->second;
  const int32_t index = static_cast<int32_t>(labels_.size());
  labels_.emplace_back(label);
  label_index_.emplace(std::string(label), index);
  return index;
}

void WaitFailureLog::FillWaitArgs(int gpu_index, kernels::WaitFlagArgs& args) const {
  args.abort = abort_;
  args.records = records_ + static_cast<size_t>(gpu_index) * kRecordsPerGpu;
  args.record_count = record_counts_[gpu_index];
  args.max_records = kRecordsPerGpu;
}

absl::Status WaitFailureLog::TakeFailures(const std::function<std::string(int32_t)>& stream_name,
                                          uint64_t timeout_ns) {
  if (*static_cast<volatile uint32_t*>(abort_) == 0) return absl::OkStatus();
  std::vector<std::string> timed_out;
  std::vector<std::string> abandoned;
  uint64_t lost = 0;
  for (size_t g = 0; g < gpu_ordinals_.size(); ++g) {
    uint32_t count = 0;
    DMALAB_CUDA_RETURN_IF_ERROR(cudaSetDevice(gpu_ordinals_[g]), "flag wait log: GPU %d",
                                gpu_ordinals_[g]);
    DMALAB_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(&count, record_counts_[g], sizeof(count), cudaMemcpyDeviceToHost),
        "flag wait log: read slot counter of GPU %d", gpu_ordinals_[g]);
    if (count > kRecordsPerGpu) lost += count - kRecordsPerGpu;
    for (uint32_t i = 0; i < count && i < kRecordsPerGpu; ++i) {
      const kernels::WaitFailureRecord& r = records_[g * kRecordsPerGpu + i];
      if (r.valid == 0) continue;
      const std::string where = absl::StrFormat(
          "rank %d stream %s: wait '%s'", r.rank, stream_name(r.stream),
          r.label >= 0 && r.label < static_cast<int32_t>(labels_.size()) ? labels_[r.label]
                                                                         : std::string("?"));
      if (r.failure == static_cast<uint32_t>(kernels::WaitFailure::kTimedOut)) {
        timed_out.push_back(absl::StrFormat("%s timed out after %s: flag=%d expected=%d", where,
                                            FormatDurationNs(timeout_ns), r.flag_seen, r.expected));
      } else {
        abandoned.push_back(absl::StrFormat("%s abandoned after %s: flag=%d expected=%d", where,
                                            FormatDurationNs(r.waited_ns), r.flag_seen,
                                            r.expected));
      }
    }
  }
  std::string message = absl::StrJoin(timed_out, "; ");
  if (timed_out.empty()) message = "a flag wait timed out (its record was lost)";
  if (!abandoned.empty()) {
    absl::StrAppend(&message, absl::StrFormat("; then %d other waits gave up: %s", abandoned.size(),
                                              absl::StrJoin(abandoned, "; ")));
  }
  if (lost > 0) absl::StrAppend(&message, absl::StrFormat("; %d more not recorded", lost));
  DMALAB_RETURN_IF_ERROR(Reset());
  return absl::DeadlineExceededError(message);
}

absl::Status WaitFailureLog::Reset() {
  std::memset(records_, 0,
              sizeof(kernels::WaitFailureRecord) * kRecordsPerGpu * gpu_ordinals_.size());
  for (size_t g = 0; g < gpu_ordinals_.size(); ++g) {
    DMALAB_CUDA_RETURN_IF_ERROR(cudaSetDevice(gpu_ordinals_[g]), "flag wait log: GPU %d",
                                gpu_ordinals_[g]);
    DMALAB_CUDA_RETURN_IF_ERROR(cudaMemset(record_counts_[g], 0, sizeof(uint32_t)),
                                "flag wait log: clear slot counter of GPU %d", gpu_ordinals_[g]);
  }
  *static_cast<volatile uint32_t*>(abort_) = 0;
  return absl::OkStatus();
}

}  // namespace dmalab

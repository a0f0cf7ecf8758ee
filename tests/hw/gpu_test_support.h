// Helpers for the tests of hw/: a CudaDevice or a skipped test, and typed host <-> device
// transfers.
#ifndef DMALAB_TESTS_HW_GPU_TEST_SUPPORT_H_
#define DMALAB_TESTS_HW_GPU_TEST_SUPPORT_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "hw/cuda_device.h"

// Declares `std::unique_ptr<dmalab::CudaDevice> var` with `world` ranks on `gpus` GPUs, or skips
// the test with the reason when this machine has no (or too few) CUDA devices.
#define DMALAB_CUDA_DEVICE_OR_SKIP(var, world, gpus, ...)                \
  absl::StatusOr<std::unique_ptr<::dmalab::CudaDevice>> var##_or =       \
      ::dmalab::CudaDevice::Create((world), (gpus), ##__VA_ARGS__);      \
  if (absl::IsUnavailable(var##_or.status())) {                          \
    GTEST_SKIP() << "needs a CUDA GPU: " << var##_or.status().message(); \
  }                                                                      \
  ASSERT_TRUE(var##_or.ok()) << var##_or.status();                       \
  std::unique_ptr<::dmalab::CudaDevice> var = *std::move(var##_or)

namespace dmalab::testing {

template <typename T>
absl::Status WriteVector(Device& device, const MemRef& dst, const std::vector<T>& values) {
  return device.Write(dst,
                      absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(values.data()),
                                                values.size() * sizeof(T)));
}

template <typename T>
absl::StatusOr<std::vector<T>> ReadVector(Device& device, const MemRef& src) {
  std::vector<T> values(src.bytes / sizeof(T));
  absl::Status s =
      device.Read(src, absl::Span<uint8_t>(reinterpret_cast<uint8_t*>(values.data()), src.bytes));
  if (!s.ok()) return s;
  return values;
}

}  // namespace dmalab::testing

#endif  // DMALAB_TESTS_HW_GPU_TEST_SUPPORT_H_

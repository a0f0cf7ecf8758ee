#include "common/core/host_simd.h"

namespace dmalab {

bool HostHasAvx512() {
#ifdef DMALAB_HOST_AVX512
  static const bool have = __builtin_cpu_supports("avx512f") &&
                           __builtin_cpu_supports("avx512dq") &&
                           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return have;
#else
  return false;
#endif
}

}  // namespace dmalab

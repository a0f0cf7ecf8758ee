// Hot host loops (fills, the host reference of Reduce) compiled twice: for the build's baseline
// ISA and for AVX-512, picked at run time by what the CPU has. Both copies are the same integer
// and IEEE arithmetic (adds, conversions, no contraction), so they give the same bytes; the
// AVX-512 copy runs 64-bit multiplies and int/float conversions as vector instructions.
//
//   DMALAB_HOST_AVX512                 defined where the compiler can build the second copy
//   DMALAB_AVX512_TARGET               the attribute that compiles a function for AVX-512
//   HostHasAvx512()                    whether this CPU runs it
#ifndef DMALAB_COMMON_CORE_HOST_SIMD_H_
#define DMALAB_COMMON_CORE_HOST_SIMD_H_

#if defined(__x86_64__) && defined(__GNUC__)
#define DMALAB_HOST_AVX512 1
#define DMALAB_AVX512_TARGET [[gnu::target("avx512f,avx512dq,avx512bw,avx512vl")]]
#endif

namespace dmalab {

// True when the CPU (and the build) can run DMALAB_AVX512_TARGET code.
bool HostHasAvx512();

}  // namespace dmalab

#endif  // DMALAB_COMMON_CORE_HOST_SIMD_H_

// The size-regime family: generated scenarios that call the all-reduce at every size where real
// all-reduces switch paths (one-shot below a threshold, two-shot or ring above, a registered
// buffer up to a few MiB, a low-latency path for up to 16 tokens, a crossover near 6 MiB), so that
// a bug confined to one path shows whatever sizes a model happens to use. `dmalab zoo` replays
// every member (zoo/zoo.h); `dmalab zoo --write-sizes=DIR` writes them as scenario files.
//
// For each world size 2, 3, 4 and 8, five regimes, one scenario each:
//   decode        1, 2, 4, ..., 16 tokens x hidden 2048, 4096, 5120, 6144, 7168, 8192, each in
//                 the default, explicit and in-place forms; the input produced by an add on the
//                 device just before the call, a residual retained across it;
//   decode_graph  the same sizes, an eager decode step (all-reduce, residual add) then the same
//                 step captured once and launched three times with fresh inputs, a tensor kept
//                 live and retained across every launch;
//   batch         32 to 256 tokens at every hidden size, forms in turn;
//   prefill       512 to 8192 tokens, one hidden size each (the largest that keeps 32 MiB);
//   thresholds    every power of two P from 1 KiB to 64 MiB (16 MiB at 8 ranks, whose every
//                 rank's memory the simulator holds): the largest size <= P and the next one
//                 above it (the largest two P: the size <= P only), forms in turn.
// Shapes the ring's rule refuses (elements not divisible by 8 W) are left out: at W 3 that keeps
// hidden 6144 for the token counts, and prefill up to 2048 tokens; every all-reduce has integer
// inputs whose sum is exact in bf16, so each output is checked against the exact sum
// (common/scenario/known_values.h).
#ifndef DMALAB_COMMON_SCENARIO_SIZE_FAMILY_H_
#define DMALAB_COMMON_SCENARIO_SIZE_FAMILY_H_

#include <string>
#include <vector>

namespace dmalab {

struct SizeFamilyMember {
  std::string file;    // "sizes/w4_decode.yaml": its name in reports (not read from disk)
  std::string regime;  // one line for tables, e.g. "decode: 1-16 tokens x hidden 2048-8192, ..."
  int world = 0;
  std::string yaml;  // the scenario text (scenarios/README.md)
};

// Every member, in a fixed order (world, then regime). Pure: the same text every call.
std::vector<SizeFamilyMember> SizeFamily();

}  // namespace dmalab

#endif  // DMALAB_COMMON_SCENARIO_SIZE_FAMILY_H_

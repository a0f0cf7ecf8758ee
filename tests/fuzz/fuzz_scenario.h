// Decodes arbitrary bytes into a small, mostly valid scenario for the replay fuzzer: world 2..4,
// tiny shapes, a handful of steps that keep track of which tensors are live and retained, and a
// set of injected faults. Deterministic: the same bytes give the same scenario. An input that
// begins with "world:" is scenario text instead, replayed as it is (no faults) when it is small
// enough; so the corpus can hold hand-written scenarios and regression inputs.
#ifndef DMALAB_TESTS_FUZZ_FUZZ_SCENARIO_H_
#define DMALAB_TESTS_FUZZ_FUZZ_SCENARIO_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "dmalab/faults.h"

namespace dmalab {

struct FuzzScenario {
  std::string yaml;   // scenario text, for ParseScenario
  FaultSet faults;    // injected into the replay
  uint64_t seed = 1;  // simulator scheduling seed
  int pieces = 1;
  bool from_text = false;  // the input was scenario text (it begins with "world:")
};

FuzzScenario DecodeFuzzScenario(const uint8_t* data, size_t size);

// Replays the decoded scenario on a SimDevice with every checker on; findings are fine, a
// crash, a hang or undefined behaviour is not. Returns the number of findings, or -1 when the
// scenario or the replay was rejected as bad input.
int64_t ReplayFuzzScenario(const FuzzScenario& scenario);

}  // namespace dmalab

#endif  // DMALAB_TESTS_FUZZ_FUZZ_SCENARIO_H_

// libFuzzer target: replays small scenarios decoded from the input (tests/fuzz/fuzz_scenario.h)
// on SimDevice, faults included. Findings are expected; crashes, hangs and UB are bugs.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)dmalab::ReplayFuzzScenario(dmalab::DecodeFuzzScenario(data, size));
  return 0;
}

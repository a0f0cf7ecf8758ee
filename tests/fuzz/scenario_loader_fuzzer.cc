// libFuzzer target: ParseScenario on arbitrary bytes must return a scenario or a located error,
// never crash, hang or hit undefined behaviour; a loaded scenario's derived counts must be
// computable.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "dmalab/scenario_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<dmalab::Scenario> s = dmalab::ParseScenario(text, "fuzz.yaml");
  if (s.ok()) {
    (void)s->ExpandedStepCount();
    (void)s->ExpandedWork();
    (void)s->MaxAllReduceBytes();
  }
  return 0;
}

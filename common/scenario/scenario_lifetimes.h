// The lifetime check of a parsed scenario: walks the steps as a replay would (repeats included,
// each repeat until its effect on the live set repeats itself) and rejects any use of a tensor
// that is not live, a default-form result bound to a name that is still live, a release of a
// tensor that is not live, and a retain, unretain or expect_unchanged that does not fit the
// retained set. Errors are located like the loader's (common/scenario/yaml_fields.h).
#ifndef DMALAB_COMMON_SCENARIO_SCENARIO_LIFETIMES_H_
#define DMALAB_COMMON_SCENARIO_SCENARIO_LIFETIMES_H_

#include "absl/status/status.h"
#include "dmalab/scenario.h"

namespace dmalab {

absl::Status CheckLifetimes(const Scenario& scenario);

}  // namespace dmalab

#endif  // DMALAB_COMMON_SCENARIO_SCENARIO_LIFETIMES_H_

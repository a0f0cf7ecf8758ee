// Integer fills whose all-reduce sums leave the dtype's exact integer range. Such a scenario is
// valid (its fills are exact), but the replay cannot check those all-reduces' outputs against
// their exact sums (wrong_sum): the sum may round, in an order the collective chooses. A scenario
// author who meant the check should know, so the command line warns, located.
#ifndef DMALAB_COMMON_SCENARIO_INTEGER_SUMS_H_
#define DMALAB_COMMON_SCENARIO_INTEGER_SUMS_H_

#include <string>
#include <vector>

#include "dmalab/scenario.h"

namespace dmalab {

// One warning per all_reduce step (once, however often repeats run it) whose input holds one
// `kind: int` fill, over a wire that is the dtype itself, and whose sum over the world can pass
// the dtype's exact integer range (ExactIntegerLimit): "FILE:LINE:COL: field 'PATH': ...".
std::vector<std::string> IntegerSumWarnings(const Scenario& scenario);

}  // namespace dmalab

#endif  // DMALAB_COMMON_SCENARIO_INTEGER_SUMS_H_

// The name tables of the scenario's and the replay's public enums (common/core/enum_table.h):
// StepKindName, AllReduceFormName, ReplayFindingKindName, the loader's parsers and the Python
// binding's come from here.
#ifndef DMALAB_COMMON_SCENARIO_ENUM_NAMES_H_
#define DMALAB_COMMON_SCENARIO_ENUM_NAMES_H_

#include "common/core/enum_table.h"
#include "dmalab/replay.h"
#include "dmalab/scenario.h"

namespace dmalab {

// The YAML keys of the steps; "free" is another name of release.
inline constexpr auto kStepKinds =
    MakeEnumTable<StepKind>({{StepKind::kFill, "fill"},
                             {StepKind::kAllReduce, "all_reduce"},
                             {StepKind::kRetain, "retain"},
                             {StepKind::kUnretain, "unretain"},
                             {StepKind::kRelease, "release"},
                             {StepKind::kRelease, "free"},
                             {StepKind::kAdd, "add"},
                             {StepKind::kExpectUnchanged, "expect_unchanged"},
                             {StepKind::kExpectEqual, "expect_equal"},
                             {StepKind::kRepeat, "repeat"},
                             {StepKind::kCaptureGraph, "capture_graph"},
                             {StepKind::kLaunchGraph, "launch_graph"}});

// A fill's `kind:`.
inline constexpr auto kFillKinds =
    MakeEnumTable<FillKind>({{FillKind::kRandom, "random"}, {FillKind::kInt, "int"}},
                            "fill kind '{name}': allowed {allowed}");

inline constexpr auto kAllReduceForms =
    MakeEnumTable<AllReduceForm>({{AllReduceForm::kDefault, "default"},
                                  {AllReduceForm::kOut, "out"},
                                  {AllReduceForm::kInPlace, "in_place"}},
                                 "all_reduce form '{name}': allowed {allowed}");

inline constexpr auto kReplayFindingKinds =
    MakeEnumTable<ReplayFindingKind>({{ReplayFindingKind::kPointerAlias, "pointer_alias"},
                                      {ReplayFindingKind::kRetainedMismatch, "retained_mismatch"},
                                      {ReplayFindingKind::kRankInconsistent, "rank_inconsistent"},
                                      {ReplayFindingKind::kExpectEqual, "expect_equal"},
                                      {ReplayFindingKind::kWrongSum, "wrong_sum"},
                                      {ReplayFindingKind::kNonFinite, "non_finite"},
                                      {ReplayFindingKind::kFreeFailed, "free_failed"},
                                      {ReplayFindingKind::kDeviceError, "device_error"},
                                      {ReplayFindingKind::kDeviceChecker, "device_checker"},
                                      {ReplayFindingKind::kCollectiveError, "collective_error"},
                                      {ReplayFindingKind::kCollectiveCrash, "collective_crash"},
                                      {ReplayFindingKind::kCollectiveHang, "collective_hang"}},
                                     "finding kind '{name}' is not one of the replay's kinds");

}  // namespace dmalab

#endif  // DMALAB_COMMON_SCENARIO_ENUM_NAMES_H_

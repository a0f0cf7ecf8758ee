// The name tables of the core's public enums (common/core/enum_table.h): DTypeName, ParseDType,
// and the lists that errors and the command line's help print, come from here.
#ifndef DMALAB_COMMON_CORE_ENUM_NAMES_H_
#define DMALAB_COMMON_CORE_ENUM_NAMES_H_

#include "common/core/enum_table.h"
#include "dmalab/device.h"
#include "dmalab/dtype.h"

namespace dmalab {

inline constexpr auto kDTypes =
    MakeEnumTable<DType>({{DType::kBF16, "bf16"}, {DType::kFP16, "fp16"}, {DType::kFP32, "fp32"}},
                         "dtype '{name}' is not known; allowed: {allowed}");

inline constexpr auto kStreamKinds = MakeEnumTable<StreamKind>(
    {{StreamKind::kCompute, "compute"}, {StreamKind::kCopy, "copy"}, {StreamKind::kFlag, "flag"}});

inline constexpr auto kCodecs = MakeEnumTable<Codec>({{Codec::kPlain, "plain"},
                                                      {Codec::kInt8Block, "int8-block"},
                                                      {Codec::kE4M3Block, "e4m3-block"}});

}  // namespace dmalab

#endif  // DMALAB_COMMON_CORE_ENUM_NAMES_H_

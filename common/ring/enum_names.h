// The name tables of the ring's public enums (common/core/enum_table.h): WireModeName,
// ParseWireMode, FaultName, FaultSet::Parse, and the lists that errors and the command line's
// help print, come from here.
#ifndef DMALAB_COMMON_RING_ENUM_NAMES_H_
#define DMALAB_COMMON_RING_ENUM_NAMES_H_

#include "common/core/enum_table.h"
#include "dmalab/faults.h"
#include "dmalab/wire.h"

namespace dmalab {

// kNative is "bf16" (the wire of a bf16 tensor); "native" is still read.
inline constexpr auto kWireModes =
    MakeEnumTable<WireMode>({{WireMode::kNative, "bf16"},
                             {WireMode::kNative, "native", /*listed=*/false},
                             {WireMode::kI8, "i8"},
                             {WireMode::kI8Ring, "i8_ring"},
                             {WireMode::kI8A2A, "i8_a2a"},
                             {WireMode::kE4M3, "e4m3"},
                             {WireMode::kE4M3Ring, "e4m3_ring"},
                             {WireMode::kE4M3A2A, "e4m3_a2a"}},
                            "wire mode '{name}' is not known; allowed: {allowed}");

// In declaration order (AllFaults).
inline constexpr auto kFaults =
    MakeEnumTable<Fault>({{Fault::kPersistentOutput, "persistent-output"},
                          {Fault::kDropCopyWait, "drop-copy-wait"},
                          {Fault::kSkipEndHandshake, "skip-end-handshake"},
                          {Fault::kEarlyReturn, "early-return"},
                          {Fault::kFlagReadyNotConsumed, "flag-ready-not-consumed"},
                          {Fault::kGraphOutputFreed, "graph-output-freed"},
                          {Fault::kInplaceAliasRing, "inplace-alias-ring"},
                          {Fault::kOwnerKeepsPrequant, "owner-keeps-prequant"}},
                         "fault '{name}' is not known; allowed: {allowed}");

}  // namespace dmalab

#endif  // DMALAB_COMMON_RING_ENUM_NAMES_H_

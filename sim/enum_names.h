// The name table of the simulator's public Fidelity (common/core/enum_table.h): FidelityName,
// ParseFidelity and the command line's --fidelity come from here.
#ifndef DMALAB_SIM_ENUM_NAMES_H_
#define DMALAB_SIM_ENUM_NAMES_H_

#include "common/core/enum_table.h"
#include "dmalab/sim.h"

namespace dmalab {

inline constexpr auto kFidelities =
    MakeEnumTable<Fidelity>({{Fidelity::kValues, "values"}, {Fidelity::kShadow, "shadow"}},
                            "fidelity is '{name}'; allowed: {allowed}");

}  // namespace dmalab

#endif  // DMALAB_SIM_ENUM_NAMES_H_

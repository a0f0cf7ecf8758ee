// The simulator as a library user makes it (dmalab::sim; docs/simulator.md): a Device of W ranks
// modelled on the CPU, executed by a seeded scheduler and watched by checkers (races, use after
// free or reuse, out-of-bounds views, deadlocks), and the poller that hands those checkers'
// findings to a replay (ReplayOptions::poll_device_findings, dmalab/replay.h).
//
// Enqueued work runs when the host synchronizes; one seed fixes the whole interleaving, so the
// same seed gives the same bytes and the same findings.
#ifndef DMALAB_SIM_H_
#define DMALAB_SIM_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "dmalab/device.h"
#include "dmalab/device_finding.h"

namespace dmalab {

// What the simulator holds. Values: real bytes and the host reference arithmetic, bit-identical
// to the CUDA kernels. Shadow: no payload, only each byte's provenance (dmalab/provenance.h), so
// whole-model scenarios replay in a fraction of the time; Read fails, ReadProvenance and
// WriteShadow work, and every checker works the same.
enum class Fidelity { kValues, kShadow };

// "values", "shadow".
std::string_view FidelityName(Fidelity fidelity);
// Parses a FidelityName; the error names what was found and what is allowed.
absl::StatusOr<Fidelity> ParseFidelity(std::string_view text);

// A simulator device of `world` ranks whose scheduler is seeded with `seed`.
std::unique_ptr<Device> NewSimDevice(int world, uint64_t seed,
                                     Fidelity fidelity = Fidelity::kValues);

// A ReplayOptions::poll_device_findings for `device`, a simulator device (NewSimDevice), which
// must outlive it: each call returns the findings the simulator's checkers made since the
// previous call, typed, and how many more they counted without keeping. For any other device,
// one without checkers of its own: an empty function (nothing to poll).
std::function<DeviceFindings()> NewFindingsPoller(const Device& device);

}  // namespace dmalab

#endif  // DMALAB_SIM_H_

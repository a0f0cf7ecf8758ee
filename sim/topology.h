// Topology: the machine a timing model predicts for (docs/design.md section 6): GPUs and the ranks
// on them, copy engines, link classes, the shared switches and root complex between GPUs, and the
// costs of kernels, flags and host calls. Loaded from scenarios/topologies/*.yaml, whose format
// scenarios/topologies/README.md documents.
//
// Units: bandwidths in GB/s (1e9 bytes per second, as nccl-tests counts), times in us.
#ifndef DMALAB_SIM_TOPOLOGY_H_
#define DMALAB_SIM_TOPOLOGY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace dmalab {

// How fast one copy moves payload over a class of link: `latency_us` of fixed cost (engine setup
// and first bytes), then its bytes at up to gbps * efficiency(bytes).
struct LinkClass {
  double gbps = 0;
  double latency_us = 0;
  // (bytes, fraction of gbps) points, sorted by bytes; interpolated linearly in log2(bytes) and
  // clamped at the ends. Empty: fraction 1 at every size.
  std::vector<std::pair<double, double>> efficiency;

  double Efficiency(double bytes) const;
  // Rate cap of a copy of `bytes`, in GB/s.
  double RateGbps(double bytes) const { return gbps * Efficiency(bytes); }

  bool operator==(const LinkClass&) const = default;
};

// A PCIe switch or a root complex. GPUs hang off one (Topology::gpu_uplinks) and switches hang
// off their parent, forming a tree; a copy between GPUs climbs from the source to the lowest
// node both GPUs are under and descends to the destination.
struct Uplink {
  std::string name;
  int parent = -1;         // index into Topology::uplinks; -1 for a root
  double gbps = 0;         // the link to the parent, per direction (full duplex); 0 when a root
  double fabric_gbps = 0;  // all copies turning around inside this node share it; 0: unlimited

  bool operator==(const Uplink&) const = default;
};

// A link class for one unordered pair of GPUs, replacing `peer` for that pair.
struct PairLink {
  int gpu_a = 0, gpu_b = 0;
  LinkClass link;

  bool operator==(const PairLink&) const = default;
};

// The kinds of reduce kernel with a block-coded operand, by their operands' codecs.
enum class CodedKernel {
  kRequantizingAdd,  // a coded term plus plain ones into a coded destination (the ring's hop)
  kEncode,           // one plain term into a coded destination (quantize)
  kDecode,           // one coded term into a plain destination (dequantize)
  kDequantizingAdd,  // a coded term plus plain ones into a plain destination
};

struct Topology {
  std::string name;
  int gpus = 0;
  std::vector<int> rank_gpus;  // rank -> GPU; several ranks on one GPU are virtual ranks
  int copy_engines = 0;        // per GPU; a copy holds one of its stream's GPU for its duration
  double memory_gbps = 0;      // per GPU: traffic (bytes read + written) all its work shares
  double port_gbps = 0;        // per GPU and direction: its connection to the fabric; 0: unlimited
  LinkClass local;             // copies within one GPU, including between its virtual ranks
  LinkClass peer;              // copies between GPUs, unless a PairLink overrides
  std::vector<PairLink> pairs;
  std::vector<Uplink> uplinks;
  std::vector<int> gpu_uplinks;  // GPU -> index into uplinks; empty: GPUs attach directly

  double kernel_launch_us = 0;    // host time to launch a kernel (reduce, signal, wait)
  double kernel_overhead_us = 0;  // device time of every kernel besides its traffic
  double reduce_gbps = 0;         // reduce kernel traffic: terms read + destination written
  // Reduce kernels with a block-coded operand (int8 / E4M3 with scales) run at this rate of
  // plain-equivalent traffic: every operand counted as elems x dtype bytes. 0: such kernels
  // run as plain ones, at reduce_gbps on their encoded bytes.
  double codec_gbps = 0;
  // Per GPU: the plain-equivalent traffic that coded kernels running at once on it (virtual
  // ranks, pieces) share, as measured with several at once. 0: no shared limit (each runs at
  // codec_gbps, memory permitting). Only beside codec_gbps.
  double codec_gpu_gbps = 0;
  // Per kind, where it differs from codec_gbps (which is the requantizing add's): 0 means
  // codec_gbps. Only beside codec_gbps.
  double codec_encode_gbps = 0;
  double codec_decode_gbps = 0;
  double codec_dequantizing_add_gbps = 0;
  // A coded kernel's rate of plain-equivalent traffic: its kind's, else codec_gbps.
  double CodecGbps(CodedKernel kind) const;
  double flag_latency_us = 0;  // from a flag store until a waiting kernel on its GPU sees it
  double copy_launch_us = 0;   // host time to enqueue a copy
  double event_us = 0;         // host time to record or wait an event

  // Ranks the topology holds.
  int max_ranks() const { return static_cast<int>(rank_gpus.size()); }
  // The link class a copy from GPU `src` to GPU `dst` uses.
  const LinkClass& LinkBetween(int src, int dst) const;

  bool operator==(const Topology&) const = default;
};

// A route's use of one uplink resource: the link up, the link down, or the fabric.
struct UplinkUse {
  enum class Kind { kUp, kDown, kFabric };
  int uplink = 0;
  Kind kind = Kind::kUp;
};

// The uplink resources a copy from GPU `src` to GPU `dst` crosses (none when src == dst).
std::vector<UplinkUse> RouteBetween(const Topology& topology, int src, int dst);

// Parses a topology document; `file` names it in errors, which read
// "FILE:LINE:COL: field 'PATH': found WHAT, allowed WHAT".
absl::StatusOr<Topology> ParseTopology(std::string_view text, std::string_view file);
// Reads and parses a topology file, within the bounds of every YAML input
// (include/dmalab/yaml_limits.h): a file that cannot be read is NotFound naming the path; a
// directory or a file of more than 4 MiB (read no further) is InvalidArgument.
absl::StatusOr<Topology> LoadTopologyFile(const std::string& path);

// Comments to write beside fields, keyed by the field's path as errors name it ("memory_gbps",
// "links.local.gbps", "kernel.codec_gbps"); a note may hold several lines.
using TopologyNotes = std::map<std::string, std::string, std::less<>>;

// Writes `topology` as a topology document that ParseTopology reads back equal (numbers in their
// shortest exact form): `ranks_per_gpu` when every GPU holds the same consecutive ranks, else
// `rank_gpus`; optional fields only when set. `header` (comment lines, each "# ..." with its
// newline) goes first; `notes` go beside their fields.
std::string TopologyYaml(const Topology& topology, std::string_view header = "",
                         const TopologyNotes& notes = {});

}  // namespace dmalab

#endif  // DMALAB_SIM_TOPOLOGY_H_

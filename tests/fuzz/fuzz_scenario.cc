#include "tests/fuzz/fuzz_scenario.h"

#include <set>
#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"
#include "dmalab/replay.h"
#include "dmalab/scenario_loader.h"
#include "sim/sim_device.h"

namespace dmalab {
namespace {

// Reads bytes; zeros once the input is exhausted, so every input decodes.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t Next() { return pos_ < size_ ? data_[pos_++] : 0; }
  int Pick(int n) { return Next() % n; }
  bool exhausted() const { return pos_ >= size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

constexpr int kTensors = 4;
// Bounds on scenarios given as text (DecodeFuzzScenario).
constexpr int64_t kMaxTextSteps = 2000;
constexpr uint64_t kMaxTextBytes = uint64_t{64} << 20;
constexpr int kMaxSteps = 12;
constexpr const char* kWires[] = {"bf16", "i8",        "i8_ring", "i8_a2a",
                                  "e4m3", "e4m3_ring", "e4m3_a2a"};
constexpr const char* kDtypes[] = {"bf16", "fp16", "fp32"};

// Emits steps while tracking liveness, so most generated scenarios pass the loader.
class StepWriter {
 public:
  explicit StepWriter(ByteReader* in) : in_(in) {}

  void Steps(int count, int depth, std::string* out) {
    const std::string indent(2 + 4 * depth, ' ');
    for (int i = 0; i < count && !in_->exhausted(); ++i) One(depth, indent, out);
  }

 private:
  std::string Name(int t) const { return absl::StrFormat("t%d", t); }
  // A tensor that is (or is not) in `set`, or -1.
  int PickIn(const std::set<int>& set, bool member) {
    std::vector<int> c;
    for (int t = 0; t < kTensors; ++t) {
      if ((set.count(t) > 0) == member) c.push_back(t);
    }
    return c.empty() ? -1 : c[in_->Pick(static_cast<int>(c.size()))];
  }

  void One(int depth, const std::string& ind, std::string* out) {
    const int op = in_->Pick(11);
    const int a = PickIn(live_, true);
    const int b = PickIn(live_, true);
    const int dead = PickIn(live_, false);
    const int kept = PickIn(retained_, true);
    if (op == 1 && a >= 0 && dead >= 0) {
      absl::StrAppendFormat(out, "%s- all_reduce: {input: %s, result: %s}\n", ind, Name(a),
                            Name(dead));
      live_.insert(dead);
    } else if (op == 2 && a >= 0 && b >= 0 && a != b) {
      absl::StrAppendFormat(out, "%s- all_reduce: {input: %s, out: %s}\n", ind, Name(a), Name(b));
    } else if (op == 3 && a >= 0) {
      absl::StrAppendFormat(out, "%s- all_reduce: {input: %s, in_place: true}\n", ind, Name(a));
    } else if (op == 4 && a >= 0 && retained_.count(a) == 0) {
      absl::StrAppendFormat(out, "%s- retain: %s\n", ind, Name(a));
      retained_.insert(a);
    } else if (op == 5 && kept >= 0) {
      absl::StrAppendFormat(out, "%s- unretain: %s\n", ind, Name(kept));
      retained_.erase(kept);
    } else if (op == 6 && a >= 0) {
      absl::StrAppendFormat(out, "%s- release: %s\n", ind, Name(a));
      live_.erase(a);
      retained_.erase(a);
    } else if (op == 7 && a >= 0 && b >= 0) {
      const int dst = in_->Pick(kTensors);
      absl::StrAppendFormat(out, "%s- add: {dst: %s, a: %s, b: %s}\n", ind, Name(dst), Name(a),
                            Name(b));
      live_.insert(dst);
    } else if (op == 8 && a >= 0 && b >= 0) {
      absl::StrAppendFormat(out, "%s- expect_equal: {a: %s, b: %s}\n", ind, Name(a), Name(b));
    } else if (op == 9 && kept >= 0) {
      absl::StrAppendFormat(out, "%s- expect_unchanged: %s\n", ind, Name(kept));
    } else if (op == 10 && depth < 2) {
      absl::StrAppendFormat(out, "%s- repeat:\n%s    times: %d\n%s    steps:\n", ind, ind,
                            1 + in_->Pick(3), ind);
      std::string body;
      Steps(1 + in_->Pick(3), depth + 1, &body);
      // An empty body is a loader error worth exercising too.
      *out += body.empty() ? ind + "      - fill: t0\n" : body;
      live_.insert(0);
    } else {
      const int t = in_->Pick(kTensors);
      if (in_->Pick(2) == 0) {
        absl::StrAppendFormat(out, "%s- fill: {tensor: %s, kind: int, lo: -8, hi: 8, seed: %d}\n",
                              ind, Name(t), in_->Next());
      } else {
        absl::StrAppendFormat(out, "%s- fill: {tensor: %s, seed: %d}\n", ind, Name(t), in_->Next());
      }
      live_.insert(t);
    }
  }

  ByteReader* in_;
  std::set<int> live_, retained_;
};

}  // namespace

FuzzScenario DecodeFuzzScenario(const uint8_t* data, size_t size) {
  FuzzScenario fs;
  constexpr std::string_view kYamlPrefix = "world:";
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (text.substr(0, kYamlPrefix.size()) == kYamlPrefix) {
    fs.yaml = std::string(text);
    fs.from_text = true;
    return fs;
  }
  ByteReader in(data, size);
  const int world = 2 + in.Pick(3);
  const int wire = in.Pick(8) < 4 ? 0 : in.Pick(7);
  const char* dtype = wire == 0 ? kDtypes[in.Pick(3)] : "bf16";
  // Compressed wires need a shard divisible by 128; now and then break that rule on purpose.
  const int64_t unit = wire == 0 || in.Pick(16) == 0 ? 8 : 128;
  const int64_t rows = 1 + in.Pick(2);
  const int64_t cols = world * unit * (1 + in.Pick(2));
  const uint8_t fault_bits = in.Next();
  const std::vector<Fault>& all = AllFaults();
  for (size_t i = 0; i < all.size() && i < 8; ++i) {
    if ((fault_bits >> i) & 1u && in.Pick(4) == 0) fs.faults.Add(all[i]);
  }
  fs.seed = 1 + in.Next();
  fs.pieces = 1 + in.Pick(3);
  fs.yaml = absl::StrFormat("world: %d\ndtype: %s\nwire: %s\nseed: %d\ntensors:\n", world, dtype,
                            kWires[wire], in.Next());
  for (int t = 0; t < kTensors; ++t) {
    absl::StrAppendFormat(&fs.yaml, "  t%d: [%d, %d]\n", t, rows, cols);
  }
  std::string steps;
  StepWriter(&in).Steps(kMaxSteps, 0, &steps);
  fs.yaml += steps.empty() ? "steps: []\n" : "steps:\n" + steps;
  return fs;
}

int64_t ReplayFuzzScenario(const FuzzScenario& fs) {
  absl::StatusOr<Scenario> scenario = ParseScenario(fs.yaml, "fuzz.yaml");
  if (!scenario.ok()) return -1;
  if (fs.from_text) {
    // Scenario text is not made small by construction: replay only what fits the fuzzer's
    // budget of work and memory.
    uint64_t bytes = 0;
    for (const auto& [name, t] : scenario->tensors) bytes += t.bytes();
    if (scenario->ExpandedWork() > kMaxTextSteps || bytes > kMaxTextBytes / scenario->world) {
      return -1;
    }
  }
  SimDevice device(scenario->world, fs.seed);
  ReplayOptions options;
  options.faults = fs.faults;
  options.pieces = fs.pieces;
  options.poll_device_findings = NewFindingsPoller(device);
  absl::StatusOr<ReplayReport> report = Replay(*scenario, &device, options);
  if (!report.ok()) return -1;
  return report->findings_total;
}

}  // namespace dmalab

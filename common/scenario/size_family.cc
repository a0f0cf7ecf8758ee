#include "common/scenario/size_family.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/core/byte_size.h"
#include "common/scenario/fill.h"
#include "dmalab/scenario.h"

namespace dmalab {

namespace {

constexpr int kWorlds[] = {2, 3, 4, 8};
constexpr int64_t kHiddens[] = {2048, 4096, 5120, 6144, 7168, 8192};
constexpr int64_t kDecodeTokens[] = {1, 2, 4, 8, 16};
constexpr int64_t kBatchTokens[] = {32, 64, 128, 256};
constexpr int64_t kPrefillTokens[] = {512, 1024, 2048, 4096, 8192};
// The largest all-reduce: 64 MiB, 16 MiB at 8 ranks (the simulator holds every rank's memory in
// one process: 8 x 64 MiB inputs and outputs with their workspace take gigabytes).
uint64_t LargestBytes(int world) { return world >= 8 ? 16ull << 20 : 64ull << 20; }
// Prefill shapes: the largest hidden size that keeps the tensor within this.
constexpr uint64_t kPrefillBytes = 32ull << 20;
constexpr int kElemBytes = 2;  // bf16
constexpr int kLaunches = 3;   // launches of each captured decode step

// The all_reduce forms, in the order members take them in turn; labels end in their names.
constexpr AllReduceForm kForms[] = {AllReduceForm::kDefault, AllReduceForm::kOut,
                                    AllReduceForm::kInPlace};

// One member's text: tensors are declared as the steps use them. Every fill is an integer fill
// bounded so that the sum over the ranks is exact in bf16 (ExactIntegerLimit).
class Member {
 public:
  explicit Member(int world)
      : world_(world), bound_(ExactIntegerLimit(DType::kBF16) / world), half_(bound_ / 2) {}

  int world() const { return world_; }
  // Whether the ring's rule (elements divisible by 8 W) allows the shape.
  bool Allowed(const std::vector<int64_t>& shape) const {
    int64_t elems = 1;
    for (int64_t d : shape) elems *= d;
    return elems % (8 * world_) == 0;
  }

  // One all-reduce of a fresh input of `shape` in `form`, labelled `label`: the input produced
  // on the device by an add (`produced`) or filled, and a residual retained across the call
  // (`residual`); every tensor released after it.
  void Call(const std::string& label, const std::vector<int64_t>& shape, AllReduceForm form,
            bool produced, bool residual) {
    const int i = cases_++;
    const std::string x = absl::StrFormat("x%d", i), y = absl::StrFormat("y%d", i);
    Comment(absl::StrFormat("%s: %s, %s", label, ShapeText(shape), Bytes(shape)));
    Input(i, x, shape, produced, label, /*keep_summands=*/false);
    std::vector<std::string> release = {x};
    if (residual) {
      const std::string r = absl::StrFormat("r%d", i);
      Tensor(r, shape);
      Fill(r, -bound_, bound_);
      Step(absl::StrFormat("retain: %s", r));
      release.push_back(r);
    }
    switch (form) {
      case AllReduceForm::kDefault:
        Tensor(y, shape);
        Step(absl::StrFormat("all_reduce: {input: %s, result: %s, label: %s}", x, y, label));
        release.push_back(y);
        break;
      case AllReduceForm::kOut:
        Tensor(y, shape);
        Fill(y, 0, 0);
        Step(absl::StrFormat("all_reduce: {input: %s, out: %s, label: %s}", x, y, label));
        release.push_back(y);
        break;
      case AllReduceForm::kInPlace:
        Step(absl::StrFormat("all_reduce: {input: %s, in_place: true, label: %s}", x, label));
        break;
    }
    for (const std::string& t : release) Step(absl::StrFormat("release: %s", t));
  }

  // The decode step at `shape`: eagerly once, then captured once and launched kLaunches times,
  // each launch after fresh inputs; `h` stays live and retained throughout.
  void DecodeGraph(const std::string& label, const std::vector<int64_t>& shape) {
    const int i = cases_++;
    const std::string x = absl::StrFormat("x%d", i), y = absl::StrFormat("y%d", i);
    const std::string res = absl::StrFormat("res%d", i), h = absl::StrFormat("h%d", i);
    Comment(
        absl::StrFormat("%s: %s, %s, eager then captured", label, ShapeText(shape), Bytes(shape)));
    Tensor(h, shape);
    Fill(h, -bound_, bound_);
    Step(absl::StrFormat("retain: %s", h));
    Tensor(res, shape);
    Fill(res, -bound_, bound_);
    Input(i, x, shape, /*produced=*/true, label, /*keep_summands=*/true);
    Tensor(y, shape);
    Fill(y, 0, 0);
    const auto all_reduce = [&](const char* what) {
      return absl::StrFormat("all_reduce: {input: %s, out: %s, label: %s.%s}", x, y, label, what);
    };
    const std::string add =
        absl::StrFormat("add: {dst: %s, a: %s, b: %s, label: %s.residual}", res, res, y, label);
    Step(all_reduce("eager"));
    Step(add);
    Step(
        absl::StrFormat("capture_graph:\n      name: g%d\n      steps:\n        - %s\n        - %s",
                        i, all_reduce("captured"), add));
    Step(absl::StrFormat("repeat:\n      times: %d\n      steps:", kLaunches));
    // The repeat's body: fresh inputs each launch (fills inside a repeat differ per iteration).
    const int64_t p_seed = seed_++, q_seed = seed_++;
    Step(absl::StrFormat("fill: {tensor: p%d, kind: int, lo: %d, hi: %d, seed: %d}", i, -half_,
                         half_, p_seed),
         "        ");
    Step(absl::StrFormat("fill: {tensor: q%d, kind: int, lo: %d, hi: %d, seed: %d}", i, -half_,
                         half_, q_seed),
         "        ");
    Step(absl::StrFormat("add: {dst: %s, a: p%d, b: q%d, label: %s.produce}", x, i, i, label),
         "        ");
    Step(absl::StrFormat("launch_graph: g%d", i), "        ");
    for (const std::string& t :
         {x, y, res, h, absl::StrFormat("p%d", i), absl::StrFormat("q%d", i)}) {
      Step(absl::StrFormat("release: %s", t));
    }
  }

  std::string Text(const std::string& name, const std::string& regime) const {
    return absl::StrFormat(
        "# Generated by dmalab (common/scenario/size_family.cc): the size-regime family.\n"
        "# %s\n"
        "name: %s\nworld: %d\ndtype: bf16\nwire: bf16\nseed: 22\ntensors:\n%ssteps:\n%s"
        "expect:\n  - faults: none\n    status: PASS\n",
        regime, name, world_, tensors_, steps_);
  }

 private:
  // x = p + q (p, q filled, then released unless `keep_summands`) when `produced`, else a fill.
  void Input(int i, const std::string& x, const std::vector<int64_t>& shape, bool produced,
             const std::string& label, bool keep_summands) {
    Tensor(x, shape);
    if (!produced) {
      Fill(x, -bound_, bound_);
      return;
    }
    const std::string p = absl::StrFormat("p%d", i), q = absl::StrFormat("q%d", i);
    Tensor(p, shape);
    Tensor(q, shape);
    Fill(p, -half_, half_);
    Fill(q, -half_, half_);
    Step(absl::StrFormat("add: {dst: %s, a: %s, b: %s, label: %s.produce}", x, p, q, label));
    if (keep_summands) return;
    Step(absl::StrFormat("release: %s", p));
    Step(absl::StrFormat("release: %s", q));
  }
  void Tensor(const std::string& name, const std::vector<int64_t>& shape) {
    absl::StrAppendFormat(&tensors_, "  %s: %s\n", name, ShapeText(shape));
  }
  void Fill(const std::string& tensor, int64_t lo, int64_t hi) {
    Step(absl::StrFormat("fill: {tensor: %s, kind: int, lo: %d, hi: %d, seed: %d}", tensor, lo, hi,
                         seed_++));
  }
  void Step(const std::string& text, const std::string& indent = "  ") {
    absl::StrAppend(&steps_, indent, "- ", text, "\n");
  }
  void Comment(const std::string& text) { absl::StrAppend(&steps_, "  # ", text, "\n"); }
  static std::string ShapeText(const std::vector<int64_t>& shape) {
    return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
  }
  static std::string Bytes(const std::vector<int64_t>& shape) {
    int64_t elems = 1;
    for (int64_t d : shape) elems *= d;
    return DescribeByteSize(static_cast<uint64_t>(elems) * kElemBytes);
  }

  int world_;
  int64_t bound_, half_;  // fills: |x| <= bound_, the summands of a produced input <= half_
  int cases_ = 0;
  int64_t seed_ = 1;
  std::string tensors_, steps_;
};

SizeFamilyMember Finish(const Member& m, const std::string& regime_name,
                        const std::string& regime) {
  SizeFamilyMember s;
  s.world = m.world();
  s.file = absl::StrFormat("sizes/w%d_%s.yaml", m.world(), regime_name);
  s.regime = regime;
  s.yaml = m.Text(absl::StrFormat("sizes_w%d_%s", m.world(), regime_name), regime);
  return s;
}

SizeFamilyMember Decode(int world) {
  Member m(world);
  for (int64_t t : kDecodeTokens) {
    for (int64_t h : kHiddens) {
      if (!m.Allowed({t, h})) continue;
      for (AllReduceForm f : kForms) {
        m.Call(absl::StrFormat("t%d.h%d.%s", t, h, AllReduceFormName(f)), {t, h}, f,
               /*produced=*/true,
               /*residual=*/true);
      }
    }
  }
  return Finish(m, "decode",
                "decode: 1-16 tokens x hidden 2048-8192, default, out and in-place forms, input "
                "from an add, residual retained");
}

SizeFamilyMember DecodeGraph(int world) {
  Member m(world);
  for (int64_t t : kDecodeTokens) {
    for (int64_t h : kHiddens) {
      if (m.Allowed({t, h})) m.DecodeGraph(absl::StrFormat("t%d.h%d", t, h), {t, h});
    }
  }
  return Finish(m, "decode_graph",
                absl::StrFormat("decode_graph: 1-16 tokens x hidden 2048-8192, eager, then "
                                "captured once and launched %d times",
                                kLaunches));
}

SizeFamilyMember Batch(int world) {
  Member m(world);
  int n = 0;
  for (int64_t t : kBatchTokens) {
    for (int64_t h : kHiddens) {
      if (!m.Allowed({t, h})) continue;
      const AllReduceForm f = kForms[n++ % 3];
      m.Call(absl::StrFormat("t%d.h%d.%s", t, h, AllReduceFormName(f)), {t, h}, f,
             /*produced=*/true,
             /*residual=*/false);
    }
  }
  return Finish(m, "batch",
                "batch: 32-256 tokens x hidden 2048-8192, forms in turn, input from an add");
}

SizeFamilyMember Prefill(int world) {
  Member m(world);
  int n = 0;
  for (int64_t t : kPrefillTokens) {
    // The largest hidden size that keeps the tensor within kPrefillBytes and the ring's rule.
    for (auto it = std::rbegin(kHiddens); it != std::rend(kHiddens); ++it) {
      if (static_cast<uint64_t>(t * *it * kElemBytes) > kPrefillBytes || !m.Allowed({t, *it})) {
        continue;
      }
      const AllReduceForm f = kForms[n++ % 3];
      m.Call(absl::StrFormat("t%d.h%d.%s", t, *it, AllReduceFormName(f)), {t, *it}, f,
             /*produced=*/false, /*residual=*/false);
      break;
    }
  }
  return Finish(m, "prefill",
                "prefill: 512-8192 tokens at the largest hidden size within 32 MiB, forms in "
                "turn");
}

SizeFamilyMember Thresholds(int world) {
  Member m(world);
  const int64_t step = 8 * world;  // elements: the ring's rule
  const uint64_t largest = LargestBytes(world);
  int n = 0;
  for (uint64_t p = 1024; p <= largest; p *= 2) {
    const int64_t at = static_cast<int64_t>(p / kElemBytes) / step * step;  // bytes <= p
    // Both sides up to a quarter of the largest size; above it only the size at P (the cost of
    // the simulator's largest tensors).
    std::vector<int64_t> sizes = {at};
    if (p <= largest / 4) sizes.push_back(at + step);
    for (int64_t elems : sizes) {
      const AllReduceForm f = kForms[n++ % 3];
      m.Call(
          absl::StrFormat("%s.%dB.%s", FormatByteSize(p), elems * kElemBytes, AllReduceFormName(f)),
          {elems}, f, /*produced=*/false, /*residual=*/false);
    }
  }
  return Finish(m, "thresholds",
                absl::StrFormat("thresholds: at or below and just above every power of two from "
                                "1 KiB to %s (the top two: at or below), forms in turn",
                                DescribeByteSize(largest)));
}

}  // namespace

std::vector<SizeFamilyMember> SizeFamily() {
  std::vector<SizeFamilyMember> all;
  for (int world : kWorlds) {
    for (SizeFamilyMember (*make)(int) : {Decode, DecodeGraph, Batch, Prefill, Thresholds}) {
      all.push_back(make(world));
    }
  }
  return all;
}

}  // namespace dmalab

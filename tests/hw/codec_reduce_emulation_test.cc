// The block-codec Reduce kernel's lane steps (hw/codec_reduce.h), run on the host lane by lane
// as the kernel runs them on a warp, against ReduceHost bit for bit: every mix of plain and
// block-coded terms and dst, random and edge inputs, in place. Runs without a GPU.
#include <cstdint>
#include <random>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/core/codec.h"
#include "common/core/reduce_host.h"
#include "gtest/gtest.h"
#include "hw/codec_reduce.h"
#include "tests/hw/codec_operands.h"

namespace dmalab {
namespace {

namespace cm = codec_math;
namespace cr = codec_reduce;
using ::dmalab::testing::Bytes;
using ::dmalab::testing::InputKind;
using ::dmalab::testing::InputKindName;
using ::dmalab::testing::kInputKinds;
using ::dmalab::testing::RandomOperand;

kernels::OperandCodec OperandCodecOf(Codec codec) {
  switch (codec) {
    case Codec::kPlain:
      return kernels::OperandCodec::kPlainBF16;
    case Codec::kInt8Block:
      return kernels::OperandCodec::kInt8Block;
    case Codec::kE4M3Block:
      return kernels::OperandCodec::kE4M3Block;
  }
  return kernels::OperandCodec::kPlainBF16;
}

// BlockReduceKernel on the host: per block, every lane's step 1, the amax over the lanes, then
// every lane's step 3 (the kernel's warp runs the lanes of a step together; each reads only
// before any writes, as here).
void EmulatedBlockReduce(const kernels::BlockReduceArgs& a) {
  for (int64_t b = 0; b < a.elems / cr::kBlockElems; ++b) {
    float sums[cr::kLanes][cr::kValuesPerLane];
    uint32_t amax = 0;
    for (int lane = 0; lane < cr::kLanes; ++lane) {
      cr::LoadLaneSums<false>(a, b, lane, sums[lane]);
      amax = cm::MaxBits(amax, cr::LaneAmaxBits(sums[lane]));
    }
    for (int lane = 0; lane < cr::kLanes; ++lane)
      cr::StoreLane<false>(a, b, lane, sums[lane], amax);
  }
}

struct Case {
  Codec dst;
  std::vector<Codec> terms;
  bool in_place;  // dst is term 0 (same codec)
};

// Runs one case on fresh random operands of `kind`: the emulated kernel against ReduceHost.
void CheckCase(std::mt19937_64& rng, const Case& c, InputKind kind, int64_t elems) {
  std::vector<Bytes> terms;
  for (Codec codec : c.terms) terms.push_back(RandomOperand(rng, codec, kind, elems));
  Bytes want_dst = c.in_place ? terms[0] : Bytes(EncodedBytes(c.dst, DType::kBF16, elems), 0xcd);
  Bytes got_dst = want_dst;
  std::vector<Bytes> got_terms = terms;

  std::vector<HostOperand> host_terms;
  for (size_t t = 0; t < terms.size(); ++t) {
    host_terms.push_back({t == 0 && c.in_place ? want_dst.data() : terms[t].data(), c.terms[t]});
  }
  ASSERT_TRUE(ReduceHost(DType::kBF16, want_dst.data(), c.dst, host_terms, elems).ok());

  kernels::BlockReduceArgs args;
  args.dst = got_dst.data();
  args.dst_codec = OperandCodecOf(c.dst);
  for (size_t t = 0; t < terms.size(); ++t) {
    args.terms[t] = t == 0 && c.in_place ? got_dst.data() : got_terms[t].data();
    args.term_codecs[t] = OperandCodecOf(c.terms[t]);
  }
  args.num_terms = static_cast<int32_t>(terms.size());
  args.elems = elems;
  EmulatedBlockReduce(args);

  std::string codecs;
  for (Codec t : c.terms) codecs += absl::StrFormat("%s ", CodecName(t));
  ASSERT_EQ(got_dst, want_dst) << "dst " << CodecName(c.dst) << ", terms " << codecs
                               << (c.in_place ? "(in place)" : "") << ", " << InputKindName(kind);
}

TEST(CodecReduceEmulationTest, EveryShapeOfRingAndA2AHopEqualsHostReduce) {
  std::mt19937_64 rng(11);
  const Codec kI8 = Codec::kInt8Block, kE4 = Codec::kE4M3Block, kPl = Codec::kPlain;
  std::vector<Case> cases;
  for (Codec b : {kI8, kE4}) {
    cases.push_back({b, {kPl}, false});             // quantize
    cases.push_back({kPl, {b}, false});             // dequantize
    cases.push_back({b, {b, kPl}, false});          // ring hop
    cases.push_back({b, {kPl, b}, false});          // ring hop, other order
    cases.push_back({kPl, {b, kPl}, false});        // last hop
    cases.push_back({kPl, {b, b, b, kPl}, false});  // a2a
    cases.push_back({b, {b, kPl}, true});           // ring hop in place
    cases.push_back({kPl, {kPl, b, b}, true});      // last hop in place
    cases.push_back({b, {b}, true});                // requantize in place
    cases.push_back({b, {b}, false});               // requantize
  }
  cases.push_back({kI8, {kE4, kPl, kI8}, false});  // mixed codecs
  cases.push_back({kE4, {kI8, kE4, kPl}, false});
  for (const Case& c : cases) {
    for (InputKind kind : kInputKinds) {
      ASSERT_NO_FATAL_FAILURE(CheckCase(rng, c, kind, 128 * 64));
    }
  }
}

TEST(CodecReduceEmulationTest, RandomMixesOfUpToSixteenTermsEqualHostReduce) {
  std::mt19937_64 rng(12);
  const Codec codecs[] = {Codec::kPlain, Codec::kInt8Block, Codec::kE4M3Block};
  for (int n = 0; n < 300; ++n) {
    Case c;
    c.dst = codecs[rng() % 3];
    const int num_terms = n < 20 ? 16 : 1 + static_cast<int>(rng() % 5);
    for (int t = 0; t < num_terms; ++t) c.terms.push_back(codecs[rng() % 3]);
    c.in_place = rng() % 4 == 0;
    if (c.in_place) c.terms[0] = c.dst;
    const InputKind kind = kInputKinds[rng() % 3];
    ASSERT_NO_FATAL_FAILURE(CheckCase(rng, c, kind, 128 * (1 + static_cast<int64_t>(rng() % 16))));
  }
}

}  // namespace
}  // namespace dmalab

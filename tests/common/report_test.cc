// Report formatting, the output hash and fill contents: the parts of a report that other
// devices and tools must reproduce exactly.
#include "dmalab/report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/core/hash.h"
#include "common/core/json_writer.h"
#include "common/core/text_escape.h"
#include "common/core/version.h"
#include "common/scenario/fill.h"
#include "gtest/gtest.h"

namespace dmalab {
namespace {

absl::Span<const uint8_t> Bytes(std::string_view s) {
  return absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

TEST(HashTest, Xxh64MatchesTheReferenceImplementation) {
  // Values from libxxhash 0.8.1 (XXH64).
  EXPECT_EQ(Xxh64(Bytes("")), 0xef46db3751d8e999ull);
  EXPECT_EQ(Xxh64(Bytes("a")), 0xd24ec4f1a98c6e5bull);
  EXPECT_EQ(Xxh64(Bytes("abc")), 0x44bc2cf5ad770999ull);
  EXPECT_EQ(Xxh64(Bytes("abc"), 7), 0x9e755206156676d7ull);
  EXPECT_EQ(Xxh64(Bytes("0123456789abcdef0123456789abcdef0")), 0xe87684f08d6d0816ull);
  std::string long_input;
  for (int i = 0; i < 3; ++i) {
    for (int b = 0; b < 256; ++b) long_input += static_cast<char>(b);
  }
  long_input += "xyz12";
  EXPECT_EQ(Xxh64(Bytes(long_input)), 0x9b7d50c047818b1bull);
  EXPECT_EQ(Xxh64(Bytes(long_input), 7), 0x732a5c9eb39a3331ull);
  EXPECT_EQ(HashString(0x44bc2cf5ad770999ull), "xxh64:44bc2cf5ad770999");
  EXPECT_EQ(HashString(1), "xxh64:0000000000000001");
}

// The reference input above (773 bytes: 24 stripes and a 5-byte tail) hashed in pieces.
TEST(HashTest, Xxh64HasherGivesTheOneShotHashWhereverTheInputIsSplit) {
  std::string input;
  for (int i = 0; i < 3; ++i) {
    for (int b = 0; b < 256; ++b) input += static_cast<char>(b);
  }
  input += "xyz12";
  const absl::Span<const uint8_t> bytes = Bytes(input);
  // Splits inside a stripe, at a stripe's end, one byte past it, in the tail, at the ends.
  for (size_t split : {size_t{0}, size_t{1}, size_t{7}, size_t{31}, size_t{32}, size_t{33},
                       size_t{100}, size_t{511}, size_t{768}, size_t{770}, bytes.size()}) {
    for (uint64_t seed : {uint64_t{0}, uint64_t{7}}) {
      Xxh64Hasher h(seed);
      h.Update(bytes.subspan(0, split));
      h.Update(bytes.subspan(split));
      EXPECT_EQ(h.Digest(), seed == 0 ? 0x9b7d50c047818b1bull : 0x732a5c9eb39a3331ull)
          << "split at " << split << ", seed " << seed;
    }
  }
  // Pieces of odd sizes, and empty ones; the digest may be taken before the last piece.
  for (size_t piece : {size_t{1}, size_t{3}, size_t{5}, size_t{13}, size_t{33}, size_t{95}}) {
    Xxh64Hasher h;
    for (size_t at = 0; at < bytes.size(); at += piece) {
      h.Update(bytes.subspan(at, piece));
      h.Update({});
      if (at == 0) {
        EXPECT_EQ(h.Digest(), Xxh64(bytes.subspan(0, piece))) << "piece " << piece;
      }
    }
    EXPECT_EQ(h.Digest(), 0x9b7d50c047818b1bull) << "pieces of " << piece;
  }
  // Inputs shorter than a stripe, whose hash takes another path.
  Xxh64Hasher empty;
  EXPECT_EQ(empty.Digest(), 0xef46db3751d8e999ull);
  Xxh64Hasher abc(7);
  abc.Update(Bytes("a"));
  abc.Update(Bytes("bc"));
  EXPECT_EQ(abc.Digest(), 0x9e755206156676d7ull);
  Xxh64Hasher over_a_stripe;  // 33 bytes: 31, then 2
  over_a_stripe.Update(Bytes("0123456789abcdef0123456789abcde"));
  over_a_stripe.Update(Bytes("f0"));
  EXPECT_EQ(over_a_stripe.Digest(), 0xe87684f08d6d0816ull);
}

TEST(ReportTest, ThousandsSeparators) {
  EXPECT_EQ(WithThousands(0), "0");
  EXPECT_EQ(WithThousands(999), "999");
  EXPECT_EQ(WithThousands(1000), "1,000");
  EXPECT_EQ(WithThousands(16803840), "16,803,840");
  EXPECT_EQ(WithThousands(-1024), "-1,024");
  EXPECT_EQ(WithThousands(-100), "-100");
}

TEST(ReportTest, SummaryLineHasExactlyTheFourTokens) {
  ReplayReport r;
  r.pointer_alias = true;
  r.retained_mismatches = 16803840;
  r.retained_elems = 16803840;
  r.findings_total = 1;
  EXPECT_EQ(SummaryLine(r),
            "pointer_alias=true  retained_mismatches=16,803,840 / 16,803,840  "
            "rank_consistent=true  status=FAIL");
  r = ReplayReport{};
  r.retained_elems = 16803840;
  EXPECT_EQ(SummaryLine(r),
            "pointer_alias=false  retained_mismatches=0 / 16,803,840  rank_consistent=true  "
            "status=PASS");
}

TEST(ReportTest, TextReportListsRanksOnlyWhenTheyDiffer) {
  ReplayReport r;
  r.scenario = "s";
  r.retained_mismatches_by_rank = {0, 5, 0};
  r.findings_total = 1;
  EXPECT_NE(FormatReportText(r).find("ranks differ: rank 0=0, rank 1=5, rank 2=0"),
            std::string::npos);
  r.retained_mismatches_by_rank = {0, 0, 0};
  EXPECT_EQ(FormatReportText(r).find("ranks differ"), std::string::npos);
}

TEST(ReportTest, JsonReportCarriesTheSummary) {
  ReplayReport r;
  r.scenario = "quote\"d";
  r.world = 2;
  r.retained_mismatches_by_rank = {3, 4};
  r.retained_mismatches = 3;
  r.retained_elems = 10;
  r.findings_total = 1;
  ReplayFinding f;
  f.kind = ReplayFindingKind::kRetainedMismatch;
  f.step_index = 2;
  f.rank = 1;
  f.storage = {{"h", MemRef{1, 0x1000, 64, 9}}};
  r.findings.push_back(f);
  const std::string json = FormatReportJson(r);
  EXPECT_EQ(
      json.rfind(absl::StrCat(R"({"schema":"dmalab.replay","schema_version":1,)",
                              R"("tool":"dmalab","tool_version":")", ToolVersion(),
                              R"(","command":"replay","collective":"","scenario":"quote\"d",)"),
                 0),
      0u);
  EXPECT_NE(json.find(R"("scheduling_seed":null,)"), std::string::npos);
  EXPECT_NE(
      json.find(R"("storage":[{"tensor":"h","rank":1,"addr":"0x1000","bytes":64,"alloc_id":9}])"),
      std::string::npos);
  EXPECT_NE(
      json.find(R"("summary":{"pointer_alias":false,"retained_mismatches":3,"retained_elems":10,)"
                R"("retained_rank":0,"retained_mismatches_by_rank":[3,4],"rank_consistent":true,)"
                R"("status":"FAIL"}})"),
      std::string::npos);
}

TEST(JsonWriterTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonWriter::Quote("a\"b\\c\n\t\x01\x1f é"), "\"a\\\"b\\\\c\\n\\t\\u0001\\u001f é\"");
  JsonWriter w;
  w.BeginObject().Key("a").BeginArray().Int(-1).UInt(18446744073709551615ull).Bool(false);
  w.EndArray().Key("b").BeginObject().EndObject().Key("c").String("").EndObject();
  EXPECT_EQ(w.str(), R"({"a":[-1,18446744073709551615,false],"b":{},"c":""})");
}

TEST(FillTest, ContentsDependOnSeedRankAndIndexOnly) {
  std::vector<uint8_t> a(2048), b(2048), c(2048);
  FillElements(DType::kBF16, FillKind::kRandom, -1, 1, FillKey(5, 1, 0), absl::MakeSpan(a));
  FillElements(DType::kBF16, FillKind::kRandom, -1, 1, FillKey(5, 1, 0), absl::MakeSpan(b));
  FillElements(DType::kBF16, FillKind::kRandom, -1, 1, FillKey(5, 1, 1), absl::MakeSpan(c));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // A prefix of a longer fill is the shorter fill: element i depends on i, not on the length.
  std::vector<uint8_t> shorter(100);
  FillElements(DType::kBF16, FillKind::kRandom, -1, 1, FillKey(5, 1, 0), absl::MakeSpan(shorter));
  EXPECT_TRUE(std::equal(shorter.begin(), shorter.end(), a.begin()));
  // Repeat iterations change the step seed; the top level leaves it as written.
  EXPECT_EQ(FillStepSeed(42, {}), 42u);
  EXPECT_NE(FillStepSeed(42, {0}), FillStepSeed(42, {1}));
  EXPECT_EQ(FillStepSeed(42, {3, 1}), SplitMix64(SplitMix64(42 ^ 4) ^ 2));
  EXPECT_EQ(FillKey(5, 1, 2), SplitMix64(SplitMix64(SplitMix64(5) ^ 1) ^ 2));
  EXPECT_EQ(SplitMix64(0), 0xe220a8397b1dcdafull);  // the generator's first output for seed 0
}

TEST(FillTest, IntegerFillsCoverTheInclusiveRangeExactly) {
  std::vector<uint8_t> out(2 * 10000);
  FillElements(DType::kBF16, FillKind::kInt, -16, -1, FillKey(0, 2, 3), absl::MakeSpan(out));
  std::vector<int> seen(16, 0);
  for (int i = 0; i < 10000; ++i) {
    const float v = LoadAsFloat(DType::kBF16, out.data(), i);
    ASSERT_EQ(v, static_cast<float>(static_cast<int>(v)));
    ASSERT_GE(v, -16);
    ASSERT_LE(v, -1);
    ++seen[static_cast<int>(v) + 16];
  }
  for (int count : seen) EXPECT_GT(count, 400);  // about 625 each
}

TEST(FillTest, RandomFillsStayInRange) {
  std::vector<uint8_t> out(4 * 10000);
  FillElements(DType::kFP32, FillKind::kRandom, 2, 3, FillKey(0, 2, 3), absl::MakeSpan(out));
  for (int i = 0; i < 10000; ++i) {
    const float v = LoadAsFloat(DType::kFP32, out.data(), i);
    ASSERT_GE(v, 2.0f);
    ASSERT_LE(v, 3.0f);
  }
}

TEST(FillTest, VectorAndPortableCodeGiveTheSameBytesAsTheFormula) {
  for (DType dtype : {DType::kBF16, DType::kFP16, DType::kFP32}) {
    for (FillKind kind : {FillKind::kInt, FillKind::kRandom}) {
      for (int64_t elems : {0, 1, 63, 64, 65, 1000, 4099}) {
        SCOPED_TRACE(absl::StrFormat("%s kind %d elems %d", DTypeName(dtype), kind, elems));
        const double lo = kind == FillKind::kInt ? -100 : -1.5,
                     hi = kind == FillKind::kInt ? 27 : 2;
        const uint64_t key = FillKey(7, static_cast<uint64_t>(elems), 2);
        std::vector<uint8_t> fast(elems * DTypeBytes(dtype)), portable(fast.size()),
            want(fast.size());
        FillElements(dtype, kind, lo, hi, key, absl::MakeSpan(fast));
        FillElementsPortable(dtype, kind, lo, hi, key, absl::MakeSpan(portable));
        // fill.h's formula, element by element.
        for (int64_t i = 0; i < elems; ++i) {
          const uint64_t u = SplitMix64(key + static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull);
          const double v = kind == FillKind::kInt
                               ? lo + static_cast<double>(((u >> 32) * 128) >> 32)
                               : lo + static_cast<double>(u >> 40) / 16777216.0 * (hi - lo);
          StoreFromFloat(dtype, want.data(), i, static_cast<float>(v));
        }
        EXPECT_EQ(fast, want);
        EXPECT_EQ(portable, want);
      }
    }
  }
}

TEST(FillTest, AccumulatedIntegerFillsAreTheFormulasValuesTimesTheCoefficient) {
  for (int64_t elems : {0, 1, 63, 64, 65, 1000, 4099}) {
    SCOPED_TRACE(absl::StrFormat("elems %d", elems));
    const double lo = -100, hi = 27;
    const uint64_t key = FillKey(7, static_cast<uint64_t>(elems), 2);
    std::vector<int64_t> acc(elems), want(elems);
    for (int64_t i = 0; i < elems; ++i) acc[i] = want[i] = 1000 * i - 5;
    AccumulateIntFill(lo, hi, key, -3, absl::MakeSpan(acc));
    // fill.h's formula, element by element: an integer in [lo, hi], 128 values.
    for (int64_t i = 0; i < elems; ++i) {
      const uint64_t u = SplitMix64(key + static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull);
      want[i] += -3 * (-100 + static_cast<int64_t>(((u >> 32) * 128) >> 32));
    }
    EXPECT_EQ(acc, want);
  }
}

// Issue 15, items 9 and 10: names and labels come from files; the text report must not let
// them start a line, and JSON must stay valid whatever bytes they hold.
TEST(TextEscapeTest, ControlCharactersAndInvalidUtf8AreEscaped) {
  EXPECT_EQ(EscapeText("plain name_1.x"), "plain name_1.x");
  EXPECT_EQ(EscapeText("a\nstatus=PASS"), "a\\nstatus=PASS");
  EXPECT_EQ(EscapeText("t\tr\r\\"), "t\\tr\\r\\\\");
  EXPECT_EQ(EscapeText(std::string("a\0b\x01\x7f", 5)), "a\\x00b\\x01\\x7f");
  EXPECT_EQ(EscapeText("caf\xc3\xa9"), "caf\xc3\xa9");                // U+00E9 kept
  EXPECT_EQ(EscapeText("\xe2\x82\xac"), "\xe2\x82\xac");              // U+20AC kept
  EXPECT_EQ(EscapeText("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");      // U+1F600 kept
  EXPECT_EQ(EscapeText("\xc2\x85"), "\\xc2\\x85");                    // U+0085 NEL, a C1 control
  EXPECT_EQ(EscapeText("\xff\xc3"), "\\xff\\xc3");                    // not UTF-8; truncated
  EXPECT_EQ(EscapeText("\xc0\xaf"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(EscapeText("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a surrogate
  EXPECT_EQ(EscapeText("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
}

TEST(JsonWriterTest, InvalidUtf8BecomesTheReplacementCharacter) {
  EXPECT_EQ(JsonWriter::Quote("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
  EXPECT_EQ(JsonWriter::Quote("a\xff\xfe"
                              "b"),
            "\"a\\ufffd\\ufffdb\"");
  EXPECT_EQ(JsonWriter::Quote("\xe2\x82"), "\"\\ufffd\\ufffd\"");
  EXPECT_EQ(JsonWriter::Quote(std::string("\0\n\"", 3)), "\"\\u0000\\n\\\"\"");
}

TEST(JsonWriterTest, NonFiniteNumbersAreNull) {
  JsonWriter w;
  w.BeginArray().Double(1.5).Double(std::numeric_limits<double>::infinity());
  w.Double(-std::numeric_limits<double>::infinity()).Double(std::nan("")).EndArray();
  EXPECT_EQ(w.str(), "[1.5,null,null,null]");
}

TEST(ReportTest, NamesAndLabelsCannotForgeALine) {
  ReplayReport r;
  r.scenario = "s\nstatus=PASS";
  r.file = "f.yaml";
  r.device = "sim";
  r.world = 2;
  r.wire = "bf16";
  r.faults = "none";
  AllReduceRecord a;
  a.step_index = 1;
  a.step = "all_reduce 'x\npointer_alias=false  status=PASS' at f.yaml:3:5";
  a.input = "in\r";
  a.output = "out";
  r.all_reduces.push_back(a);
  r.all_reduces_total = 3;
  ReplayFinding f;
  f.kind = ReplayFindingKind::kExpectEqual;
  f.step_index = 1;
  f.step = "expect_equal at f.yaml:4:5";
  f.detail = "'a\n' differs";
  f.storage = {{"a\nstatus=PASS", MemRef{}}};
  r.findings.push_back(f);
  r.findings_total = 1;
  GroupFindings(r);  // the report prints groups; the step becomes the group's description
  const std::string text = FormatReportText(r);
  EXPECT_EQ(text.rfind("scenario s\\nstatus=PASS (f.yaml)\n", 0), 0u) << text;
  EXPECT_NE(text.find("step 1 all_reduce 'x\\npointer_alias=false  status=PASS' at f.yaml:3:5: "
                      "in\\r -> out (default)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("FINDING expect_equal: step 1 expect_equal at f.yaml:4:5, rank 0: "
                      "'a\\n' differs; storage: 'a\\nstatus=PASS' rank 0"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n... and 2 more all-reduces\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nERROR SUMMARY: 1 finding (1 distinct)\n"), std::string::npos) << text;
  // Eight lines: scenario, header, one all-reduce, one finding, the error summary, the elision,
  // the rank note, the summary.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 8) << text;
  EXPECT_NE(FormatReportJson(r).find("\"all_reduces_total\":3"), std::string::npos);
}

}  // namespace
}  // namespace dmalab

namespace dmalab {
namespace {

// A race seen on ranks 0, 1 and 3 in iterations 1, 2 and 4 of 4: one line, and the summary.
TEST(ReportTest, AGroupIsOneLineWithItsRanksIterationsAndCount) {
  FindingGroup g;
  g.first.checker = "race";
  g.first.step_index = 5;
  g.first.step_desc = "all_reduce 'o_proj' at s.yaml:9:7";
  g.first.iterations = 4;
  g.first.rank = 1;
  g.first.detail = "rank 1 bytes [0x100, 0x200): write and read not ordered";
  g.first.storage = {{"all_reduce slab", MemRef{1, 0x100, 0x100, 2}}};
  g.count = 7;
  g.ranks = {0, 1, 3};
  g.iteration_ranges = {{1, 2}, {4, 4}};
  EXPECT_EQ(FormatFindingGroup(g),
            "FINDING race: step 5 all_reduce 'o_proj' at s.yaml:9:7, iterations 1-2,4 of 4, "
            "ranks 0-1,3 (7 findings, first shown): rank 1 bytes [0x100, 0x200): write and read "
            "not ordered; storage: 'all_reduce slab' rank 1 [0x100, 0x200) alloc 2");
}

// One finding outside a repeat keeps the old one-finding shape; no storage, no "storage:".
TEST(ReportTest, ASingleFindingWithoutStorageHasNoStorageClause) {
  FindingGroup g;
  g.first.checker = "deadlock";
  g.first.step_index = 3;
  g.first.step_desc = "all_reduce at s.yaml:4:5";
  g.first.rank = 2;
  g.first.detail = "work remains but no stream can progress";
  g.count = 1;
  g.ranks = {2};
  EXPECT_EQ(FormatFindingGroup(g),
            "FINDING deadlock: step 3 all_reduce at s.yaml:4:5, rank 2: work remains but no "
            "stream can progress");
}

TEST(ReportTest, ErrorSummaryCountsFindingsAndDistinctOnes) {
  ReplayReport r;
  EXPECT_EQ(ErrorSummaryLine(r), "ERROR SUMMARY: 0 findings");
  r.findings_total = 1;
  r.groups.resize(1);
  EXPECT_EQ(ErrorSummaryLine(r), "ERROR SUMMARY: 1 finding (1 distinct)");
  r.findings_total = 1240;
  r.groups.resize(3);
  r.groups_not_kept = 2;
  r.device_findings_not_kept = 200;
  EXPECT_EQ(ErrorSummaryLine(r),
            "ERROR SUMMARY: 1,240 findings (5 distinct); 2 distinct findings not listed (the "
            "first 256 are); 200 device findings counted but not kept by the device (not "
            "listed)");
}

// The text report: groups, then the ERROR SUMMARY, and the summary line last, unchanged.
TEST(ReportTest, TextReportEndsWithGroupsErrorSummaryAndTheSummaryLine) {
  ReplayReport r;
  r.scenario = "s";
  r.file = "s.yaml";
  r.world = 2;
  r.retained_mismatches_by_rank = {0, 0};
  r.findings_total = 2;
  FindingGroup g;
  g.first.checker = "free_failed";
  g.first.step_desc = "end of scenario";
  g.first.detail = "freeing 'y' failed";
  g.count = 2;
  g.ranks = {0, 1};
  r.groups = {g};
  const std::string text = FormatReportText(r);
  EXPECT_NE(text.find("\nFINDING free_failed: end of scenario, ranks 0-1 (2 findings, first "
                      "shown): freeing 'y' failed\nERROR SUMMARY: 2 findings (1 distinct)\n"
                      "retained_mismatches counts rank 0's copy of each retained tensor\n"
                      "pointer_alias=false  retained_mismatches=0 / 0  rank_consistent=true  "
                      "status=FAIL\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace dmalab

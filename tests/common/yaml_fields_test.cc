// YamlFields: typed reading of YAML fields, with errors located at the offending node and naming
// the field, what was found and what is allowed.
#include "common/scenario/yaml_fields.h"

#include <string>

#include "gtest/gtest.h"

namespace dmalab {
namespace {

using Bound = YamlFields::Bound;

constexpr char kDoc[] = R"(name: ''
link: {gbps: 0, latency_us: 2.5}
costs: {launch_us: -1, event_us: inf}
list: [1, 2]
map: {a: 1}
)";

// The message of a failed read, or "OK".
std::string ErrorOf(const absl::Status& status) {
  return status.ok() ? "OK" : std::string(status.message());
}
template <typename T>
std::string ErrorOf(const absl::StatusOr<T>& value) {
  return ErrorOf(value.status());
}

class YamlFieldsTest : public ::testing::Test {
 protected:
  const YAML::Node doc_ = YAML::Load(kDoc);
  const YamlFields f_{"f.yaml"};
};

TEST_F(YamlFieldsTest, IndexPathNamesAListItem) {
  EXPECT_EQ(IndexPath("list", 3), "list[3]");
  EXPECT_EQ(FieldPath(IndexPath("links.pairs", 0), "gpus"), "links.pairs[0].gpus");
}

TEST_F(YamlFieldsTest, MissingIsLocatedAtTheMap) {
  EXPECT_EQ(ErrorOf(f_.Missing(doc_["link"], "link.efficiency", "a list")),
            "f.yaml:2:7: field 'link.efficiency': found nothing (the field is missing), allowed "
            "a list");
}

TEST_F(YamlFieldsTest, NonEmptyStringRejectsTheEmptyOneAndNonScalars) {
  EXPECT_EQ(ErrorOf(f_.NonEmptyString(doc_["name"], "name", "a name")),
            "f.yaml:1:7: field 'name': found '', allowed a name");
  EXPECT_EQ(ErrorOf(f_.NonEmptyString(doc_["list"], "list", "a name")),
            "f.yaml:4:7: field 'list': found a list, allowed a name");
  EXPECT_EQ(*f_.NonEmptyString(doc_["list"][0], "list[0]", "a name"), "1");
}

TEST_F(YamlFieldsTest, NamedTakesATablesNamesAndListsThemOtherwise) {
  enum class Side { kLeft, kRight };
  constexpr auto kSides = MakeEnumTable<Side>(
      {{Side::kLeft, "left"}, {Side::kRight, "right"}, {Side::kRight, "r", /*listed=*/false}});
  const YAML::Node doc = YAML::Load("a: right\nb: r\nc: up\nd: [1]\n");
  EXPECT_EQ(*f_.Named(doc["a"], "a", kSides), Side::kRight);
  EXPECT_EQ(*f_.Named(doc["b"], "b", kSides), Side::kRight);
  EXPECT_EQ(ErrorOf(f_.Named(doc["c"], "c", kSides)),
            "f.yaml:3:4: field 'c': found 'up', allowed left, right");
  EXPECT_EQ(ErrorOf(f_.Named(doc["d"], "d", kSides)),
            "f.yaml:4:4: field 'd': found a list, allowed left, right");
}

TEST_F(YamlFieldsTest, NumberKeepsToItsBound) {
  const YAML::Node link = doc_["link"], costs = doc_["costs"];
  EXPECT_EQ(ErrorOf(f_.Number(link["gbps"], "link.gbps", Bound::kPositive)),
            "f.yaml:2:14: field 'link.gbps': found '0', allowed a number > 0");
  EXPECT_EQ(*f_.Number(link["gbps"], "link.gbps", Bound::kNonNegative), 0);
  EXPECT_EQ(*f_.Number(link["latency_us"], "link.latency_us", Bound::kPositive), 2.5);
  EXPECT_EQ(ErrorOf(f_.Number(costs["launch_us"], "costs.launch_us", Bound::kNonNegative)),
            "f.yaml:3:20: field 'costs.launch_us': found '-1', allowed a number >= 0");
  EXPECT_EQ(ErrorOf(f_.Number(costs["event_us"], "costs.event_us", Bound::kNonNegative)),
            "f.yaml:3:34: field 'costs.event_us': found 'inf', allowed a number >= 0");
  EXPECT_EQ(ErrorOf(f_.Number(doc_["map"], "map", Bound::kPositive)),
            "f.yaml:5:6: field 'map': found a map, allowed a number > 0");
}

TEST_F(YamlFieldsTest, RequiredNumberNamesItsBoundWhenMissing) {
  const YAML::Node link = doc_["link"];
  EXPECT_EQ(*f_.RequiredNumber(link, "link", "latency_us", Bound::kNonNegative), 2.5);
  EXPECT_EQ(ErrorOf(f_.RequiredNumber(link, "link", "gbps", Bound::kPositive)),
            "f.yaml:2:14: field 'link.gbps': found '0', allowed a number > 0");
  EXPECT_EQ(ErrorOf(f_.RequiredNumber(link, "link", "fabric_gbps", Bound::kPositive)),
            "f.yaml:2:7: field 'link.fabric_gbps': found nothing (the field is missing), allowed "
            "a number > 0");
}

TEST_F(YamlFieldsTest, OptionalNumberIsZeroWhenAbsentAndNonNegativeWhenPresent) {
  EXPECT_EQ(*f_.OptionalNumber(doc_["link"], "link", "fabric_gbps"), 0);
  EXPECT_EQ(*f_.OptionalNumber(doc_["link"], "link", "latency_us"), 2.5);
  EXPECT_EQ(ErrorOf(f_.OptionalNumber(doc_["costs"], "costs", "launch_us")),
            "f.yaml:3:20: field 'costs.launch_us': found '-1', allowed a number >= 0");
}

TEST_F(YamlFieldsTest, CheckListAcceptsOnlyAList) {
  EXPECT_EQ(ErrorOf(f_.CheckList(doc_["list"], "list", "a list of numbers")), "OK");
  EXPECT_EQ(ErrorOf(f_.CheckList(doc_["map"], "map", "a list of numbers")),
            "f.yaml:5:6: field 'map': found a map, allowed a list of numbers");
  EXPECT_EQ(ErrorOf(f_.CheckList(doc_["name"], "name", "a list of numbers")),
            "f.yaml:1:7: field 'name': found '', allowed a list of numbers");
}

TEST_F(YamlFieldsTest, CheckMapNamesTheRootAsTheDocument) {
  EXPECT_EQ(ErrorOf(f_.CheckMap(YAML::Load("[k]: 1\n"), "", {"name"})),
            "f.yaml:1:1: field '(document)': found a key that is a list, allowed a map with fields "
            "name");
  EXPECT_EQ(ErrorOf(f_.CheckMap(doc_["map"], "map", {"b"})),
            "f.yaml:5:7: field 'map.a': found an unknown field, allowed fields b");
}

}  // namespace
}  // namespace dmalab

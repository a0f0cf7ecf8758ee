// EnumTable: names, lookups, the parse error and the allowed list of a small table.
#include "common/core/enum_table.h"

#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"

namespace dmalab {
namespace {

enum class Color { kRed, kGreen, kBlue, kUnnamed };

constexpr auto kColors = MakeEnumTable<Color>({{Color::kRed, "red"},
                                               {Color::kGreen, "green"},
                                               {Color::kGreen, "lime"},
                                               {Color::kBlue, "blue"},
                                               {Color::kBlue, "navy", /*listed=*/false}},
                                              "color '{name}' is not known; allowed: {allowed}");

// Usable at compile time.
static_assert(kColors.size() == 5);
static_assert(kColors.Name(Color::kBlue) == "blue");
static_assert(kColors.Find("lime") == Color::kGreen);
static_assert(!kColors.Find("pink").has_value());

TEST(EnumTableTest, NameIsTheFirstNameOfAValue) {
  EXPECT_EQ(kColors.Name(Color::kRed), "red");
  EXPECT_EQ(kColors.Name(Color::kGreen), "green");
  EXPECT_EQ(kColors.Name(Color::kBlue), "blue");
  EXPECT_EQ(kColors.Name(Color::kUnnamed), "?");
  EXPECT_EQ(kColors.Name(Color::kUnnamed, "unknown"), "unknown");
  EXPECT_EQ(kColors.Name(static_cast<Color>(42)), "?");
}

TEST(EnumTableTest, FindTakesEveryNameListedOrNot) {
  EXPECT_EQ(kColors.Find("red"), Color::kRed);
  EXPECT_EQ(kColors.Find("green"), Color::kGreen);
  EXPECT_EQ(kColors.Find("lime"), Color::kGreen);
  EXPECT_EQ(kColors.Find("navy"), Color::kBlue);
  EXPECT_EQ(kColors.Find("Red"), std::nullopt);
  EXPECT_EQ(kColors.Find(""), std::nullopt);
  EXPECT_EQ(kColors.Find("red "), std::nullopt);
}

TEST(EnumTableTest, ParseErrorFollowsTheTablesText) {
  EXPECT_EQ(*kColors.Parse("blue"), Color::kBlue);
  EXPECT_EQ(*kColors.Parse("navy"), Color::kBlue);
  const absl::StatusOr<Color> bad = kColors.Parse("pink");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "color 'pink' is not known; allowed: red, green, lime, blue");
  // The parsed text is put in as it is, placeholders and all.
  EXPECT_EQ(kColors.Parse("{allowed}").status().message(),
            "color '{allowed}' is not known; allowed: red, green, lime, blue");
}

TEST(EnumTableTest, ParseErrorWithoutATextOfItsOwn) {
  constexpr auto kTable = MakeEnumTable<Color>({{Color::kRed, "red"}, {Color::kBlue, "blue"}});
  EXPECT_EQ(kTable.Parse("green").status().message(), "'green' is not known; allowed: red, blue");
  constexpr auto kNoList = MakeEnumTable<Color>({{Color::kRed, "red"}}, "no color '{name}'");
  EXPECT_EQ(kNoList.Parse("x").status().message(), "no color 'x'");
}

TEST(EnumTableTest, AllowedAndNamesListTheListedNamesInOrder) {
  EXPECT_EQ(kColors.Allowed(), "red, green, lime, blue");
  EXPECT_EQ(kColors.Allowed("|"), "red|green|lime|blue");
  EXPECT_EQ(kColors.Names(), (std::vector<std::string>{"red", "green", "lime", "blue"}));
  constexpr auto kUnlistedFirst =
      MakeEnumTable<Color>({{Color::kRed, "crimson", /*listed=*/false}, {Color::kRed, "red"}});
  EXPECT_EQ(kUnlistedFirst.Allowed(), "red");
  EXPECT_EQ(kUnlistedFirst.Name(Color::kRed), "crimson");
}

TEST(EnumTableTest, IteratesOverEveryEntry) {
  std::vector<std::string> seen;
  for (const EnumName<Color>& e : kColors) {
    seen.push_back(std::to_string(static_cast<int>(e.value)) + ":" + std::string(e.name) +
                   (e.listed ? "" : "*"));
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"0:red", "1:green", "1:lime", "2:blue", "2:navy*"}));
}

}  // namespace
}  // namespace dmalab

// MaxMinFairRates against rates worked out by hand (progressive filling, chosen so that every
// step is exact in binary floating point).
#include "sim/fair_share.h"

#include <vector>

#include "gtest/gtest.h"

namespace dmalab {
namespace {

std::vector<double> Rates(const std::vector<FlowDemand>& flows, std::vector<double> capacities) {
  std::vector<const FlowDemand*> ptrs;
  for (const FlowDemand& f : flows) ptrs.push_back(&f);
  return MaxMinFairRates(ptrs, capacities);
}

TEST(FairShareTest, NoFlowsHaveNoRates) { EXPECT_TRUE(Rates({}, {64}).empty()); }

TEST(FairShareTest, AFlowAloneRunsAtItsOwnCapOrTheResourcesCapacity) {
  EXPECT_EQ(Rates({{10, {{0, 1}}}}, {100}), std::vector<double>{10});
  EXPECT_EQ(Rates({{1000, {{0, 1}}}}, {64}), std::vector<double>{64});
  // A same-GPU copy reads and writes memory: two bytes of capacity per byte moved.
  EXPECT_EQ(Rates({{1000, {{0, 2}}}}, {64}), std::vector<double>{32});
  // No shared resource: only its cap limits it.
  EXPECT_EQ(Rates({{5, {}}}, {64}), std::vector<double>{5});
}

TEST(FairShareTest, EqualFlowsSplitAResourceEvenly) {
  EXPECT_EQ(Rates({{100, {{0, 1}}}, {100, {{0, 1}}}}, {64}), (std::vector<double>{32, 32}));
}

TEST(FairShareTest, WhatACappedFlowLeavesGoesToTheOthers) {
  // All grow to 8 (A's cap; 40 of 64 left), then B and C share the 40.
  EXPECT_EQ(Rates({{8, {{0, 1}}}, {100, {{0, 1}}}, {100, {{0, 1}}}}, {64}),
            (std::vector<double>{8, 28, 28}));
}

TEST(FairShareTest, AFlowHeldByOneResourceLeavesItsShareOfAnotherToTheFlowsThere) {
  // A on R0, B on R0 and R1, C on R1. R0 (30) fills first at 15 each, freezing A and B; C then
  // takes what is left of R1: 100 - 15 - 15 = 70 more.
  EXPECT_EQ(Rates({{1000, {{0, 1}}}, {1000, {{0, 1}, {1, 1}}}, {1000, {{1, 1}}}}, {30, 100}),
            (std::vector<double>{15, 15, 85}));
}

}  // namespace
}  // namespace dmalab

// Vector clocks (shared representations, copied on change, joins remembered) and the race
// checker's byte intervals, on their own: exact components and exact conflicts.
#include "sim/race_checker.h"

#include <optional>

#include "gtest/gtest.h"
#include "sim/vector_clock.h"

namespace dmalab {
namespace {

TEST(VectorClockTest, ACopyKeepsItsValuesWhenTheOriginalChanges) {
  VectorClock a;
  a.Tick(3);
  VectorClock b = a;  // shares a's components
  a.Tick(3);
  a.Tick(70);  // past any inline size
  EXPECT_EQ(a.Get(3), 2u);
  EXPECT_EQ(a.Get(70), 1u);
  EXPECT_EQ(b.Get(3), 1u);
  EXPECT_EQ(b.Get(70), 0u);
  b.Tick(0);
  EXPECT_EQ(a.Get(0), 0u);
  EXPECT_EQ(b.Get(0), 1u);
}

TEST(VectorClockTest, JoinTakesTheComponentwiseMaximum) {
  VectorClock a, b;
  for (int i = 0; i < 5; ++i) a.Tick(1);
  a.Tick(9);
  for (int i = 0; i < 3; ++i) b.Tick(1);
  b.Tick(2);
  for (int i = 0; i < 7; ++i) b.Tick(40);
  a.Join(b);
  EXPECT_EQ(a.Get(1), 5u);
  EXPECT_EQ(a.Get(2), 1u);
  EXPECT_EQ(a.Get(9), 1u);
  EXPECT_EQ(a.Get(40), 7u);
  EXPECT_EQ(a.Get(41), 0u);
  EXPECT_EQ(b.Get(9), 0u);  // the joined clock is unchanged
}

TEST(VectorClockTest, JoiningAClockAgainAfterItChangedTakesTheNewValues) {
  VectorClock host, stream;
  host.Tick(0);
  stream.Join(host);
  stream.Tick(5);
  stream.Join(host);  // remembered: nothing new
  EXPECT_EQ(stream.Get(0), 1u);
  host.Tick(0);  // host's contents change, so does what joining it means
  stream.Join(host);
  EXPECT_EQ(stream.Get(0), 2u);
  EXPECT_EQ(stream.Get(5), 1u);
}

TEST(VectorClockTest, ACopyOfAJoinedClockChangedLaterIsJoinedAnew) {
  VectorClock a;
  a.Tick(2);
  VectorClock snapshot = a;  // an event's record: shares a's components
  VectorClock waiter;
  waiter.Join(snapshot);
  a.Tick(2);  // a copies its components before changing them; the snapshot keeps 1
  waiter.Join(a);
  EXPECT_EQ(waiter.Get(2), 2u);
  EXPECT_EQ(snapshot.Get(2), 1u);
  EXPECT_TRUE(waiter.HasSeen(2, 2));
  EXPECT_FALSE(waiter.HasSeen(2, 3));
}

Access At(int timeline, uint32_t clock, int64_t op) { return Access{timeline, clock, op}; }

VectorClock ClockWith(int timeline, uint32_t value) {
  VectorClock c;
  for (uint32_t i = 0; i < value; ++i) c.Tick(timeline);
  return c;
}

TEST(RaceCheckerTest, AnUnorderedWriteAfterAWriteOfTheSameBytesIsAConflict) {
  RaceChecker r(1);
  EXPECT_FALSE(r.Write(0, 100, 200, At(1, 1, 7), ClockWith(1, 1)).has_value());
  const std::optional<Conflict> c = r.Write(0, 100, 200, At(2, 1, 8), ClockWith(2, 1));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->earlier.op, 7);
  EXPECT_TRUE(c->earlier_is_write);
  EXPECT_EQ(c->lo, 100u);
  EXPECT_EQ(c->hi, 200u);
}

TEST(RaceCheckerTest, AWriteOrderedAfterTheReadsOfItsBytesIsNotAConflict) {
  RaceChecker r(1);
  EXPECT_FALSE(r.Write(0, 0, 64, At(1, 1, 1), ClockWith(1, 1)).has_value());
  VectorClock reader = ClockWith(2, 1);
  reader.Join(ClockWith(1, 1));  // saw the write
  EXPECT_FALSE(r.Read(0, 0, 64, At(2, 1, 2), reader).has_value());
  VectorClock writer = ClockWith(1, 2);
  EXPECT_TRUE(r.Write(0, 0, 64, At(1, 2, 3), writer).has_value());  // has not seen the read
  writer.Join(reader);
  EXPECT_FALSE(r.Write(0, 0, 64, At(1, 3, 4), writer).has_value());
}

TEST(RaceCheckerTest, PartialOverlapsNameTheFirstConflictingBytes) {
  RaceChecker r(2);
  EXPECT_FALSE(r.Write(1, 0, 100, At(1, 1, 1), ClockWith(1, 1)).has_value());
  EXPECT_FALSE(r.Write(1, 200, 300, At(1, 2, 2), ClockWith(1, 2)).has_value());
  // Reads [50, 250) on another timeline: bytes [50, 100) of the first write conflict first.
  const std::optional<Conflict> c = r.Read(1, 50, 250, At(2, 1, 3), ClockWith(2, 1));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->earlier.op, 1);
  EXPECT_EQ(c->lo, 50u);
  EXPECT_EQ(c->hi, 100u);
  // Bytes [100, 200) were never written; a write there conflicts only with that read.
  const std::optional<Conflict> w = r.Write(1, 120, 130, At(1, 3, 4), ClockWith(1, 3));
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->earlier.op, 3);
  EXPECT_FALSE(w->earlier_is_write);
  EXPECT_EQ(w->lo, 120u);
  EXPECT_EQ(w->hi, 130u);
  // Other ranks are other memory.
  EXPECT_FALSE(r.Write(0, 0, 300, At(2, 2, 5), ClockWith(2, 2)).has_value());
}

TEST(RaceCheckerTest, AWriteSupersedesEveryEarlierAccessToItsBytes) {
  RaceChecker r(1);
  EXPECT_FALSE(r.Read(0, 0, 8, At(2, 1, 1), ClockWith(2, 1)).has_value());
  VectorClock w = ClockWith(1, 1);
  w.Join(ClockWith(2, 1));
  EXPECT_FALSE(r.Write(0, 0, 8, At(1, 1, 2), w).has_value());
  // A third timeline that saw the write but not the read writes: no conflict, the read is gone.
  VectorClock third = ClockWith(3, 1);
  third.Join(ClockWith(1, 1));
  EXPECT_FALSE(r.Write(0, 0, 8, At(3, 1, 3), third).has_value());
}

}  // namespace
}  // namespace dmalab

// Streams, events and graphs are distinct types: a call that takes (event, stream) does not
// accept the two swapped, which int32_t ids used to allow.
#include "dmalab/ids.h"

#include <type_traits>

#include "absl/strings/str_format.h"
#include "dmalab/device.h"
#include "gtest/gtest.h"

namespace dmalab {
namespace {

static_assert(!std::is_convertible_v<StreamId, EventId>);
static_assert(!std::is_convertible_v<EventId, StreamId>);
static_assert(!std::is_convertible_v<int32_t, StreamId>, "an id is made explicitly");
static_assert(!std::is_convertible_v<StreamId, int32_t>);
// Device::RecordEvent(event, stream) and Device::WaitEvent(stream, event): the right order
// compiles, the swapped one does not.
static_assert(std::is_invocable_v<decltype(&Device::RecordEvent), Device&, EventId, StreamId>);
static_assert(!std::is_invocable_v<decltype(&Device::RecordEvent), Device&, StreamId, EventId>);
static_assert(std::is_invocable_v<decltype(&Device::WaitEvent), Device&, StreamId, EventId>);
static_assert(!std::is_invocable_v<decltype(&Device::WaitEvent), Device&, EventId, StreamId>);
static_assert(!std::is_invocable_v<decltype(&Device::LaunchGraph), Device&, StreamId>);

TEST(DeviceObjectIdTest, DefaultIsInvalidAndValuesCompareAndFormat) {
  EXPECT_FALSE(StreamId().valid());
  EXPECT_EQ(StreamId().value(), -1);
  EXPECT_TRUE(StreamId(0).valid());
  EXPECT_LT(EventId(2), EventId(3));
  EXPECT_EQ(GraphId(7), GraphId(7));
  EXPECT_EQ(absl::StrFormat("stream %d", StreamId(12)), "stream 12");
}

}  // namespace
}  // namespace dmalab

// Typed handles of device objects: a stream, an event and a graph are each their own type, so a
// call that takes (event, stream) does not accept (stream, event).
#ifndef DMALAB_IDS_H_
#define DMALAB_IDS_H_

#include <compare>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"

namespace dmalab {

// A device's number for one of its objects of kind Tag. Default-constructed: invalid (-1).
template <typename Tag>
class DeviceObjectId {
 public:
  constexpr DeviceObjectId() = default;
  constexpr explicit DeviceObjectId(int32_t value) : value_(value) {}

  constexpr int32_t value() const { return value_; }
  constexpr bool valid() const { return value_ >= 0; }
  friend constexpr auto operator<=>(DeviceObjectId, DeviceObjectId) = default;

  template <typename H>
  friend H AbslHashValue(H h, DeviceObjectId id) {
    return H::combine(std::move(h), id.value_);
  }
  // absl::StrFormat("%d", id) prints the number.
  friend absl::FormatConvertResult<absl::FormatConversionCharSet::kIntegral> AbslFormatConvert(
      DeviceObjectId id, const absl::FormatConversionSpec& /*spec*/, absl::FormatSink* sink) {
    sink->Append(std::to_string(id.value_));
    return {true};
  }

 private:
  int32_t value_ = -1;
};

using StreamId = DeviceObjectId<struct StreamTag>;
using EventId = DeviceObjectId<struct EventTag>;
using GraphId = DeviceObjectId<struct GraphTag>;

}  // namespace dmalab

#endif  // DMALAB_IDS_H_

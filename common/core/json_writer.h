// A small streaming JSON writer (RFC 8259) for machine-readable reports.
//
// Strings are escaped: quote, backslash and control characters (U+0000..U+001F, as \n, \t, ...
// or \u00XX); well-formed UTF-8 passes through, and every byte that is not part of well-formed
// UTF-8 (common/core/text_escape.h) becomes \ufffd, the replacement character, so the output is
// always valid JSON whatever bytes a name holds. Numbers that are not finite (inf, nan) are
// written as null. Output is compact, one document per writer. Misuse (a value where a key is due,
// unbalanced End calls) is a programming error and is not diagnosed.
#ifndef DMALAB_COMMON_CORE_JSON_WRITER_H_
#define DMALAB_COMMON_CORE_JSON_WRITER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dmalab {

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  // The key of the next member of the current object.
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view value);
  JsonWriter& Int(int64_t value);
  JsonWriter& UInt(uint64_t value);
  JsonWriter& Double(double value);  // null when not finite
  JsonWriter& Bool(bool value);
  JsonWriter& Null();
  // The value, or null when there is none.
  JsonWriter& OptionalUInt(std::optional<uint64_t> value);

  // The text written so far.
  const std::string& str() const { return out_; }

  // `value` as a JSON string literal, quotes included.
  static std::string Quote(std::string_view value);
  // `value` as a JSON number (shortest round-trip form, %.17g), or null when not finite.
  static std::string Number(double value);

 private:
  void BeforeValue();

  std::string out_;
  std::vector<bool> first_;  // per open container: no member written yet
  bool after_key_ = false;
};

}  // namespace dmalab

#endif  // DMALAB_COMMON_CORE_JSON_WRITER_H_

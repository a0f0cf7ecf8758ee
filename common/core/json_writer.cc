#include "common/core/json_writer.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "common/core/text_escape.h"

namespace dmalab {

std::string JsonWriter::Quote(std::string_view value) {
  std::string q = "\"";
  for (size_t i = 0; i < value.size(); ++i) {
    const char c = value[i];
    const size_t n = Utf8SequenceLength(value, i);
    if (n == 0) {  // not UTF-8: the replacement character, one per byte
      q += "\\ufffd";
      continue;
    }
    if (n > 1) {
      q.append(value.substr(i, n));
      i += n - 1;
      continue;
    }
    switch (c) {
      case '"':
        q += "\\\"";
        break;
      case '\\':
        q += "\\\\";
        break;
      case '\n':
        q += "\\n";
        break;
      case '\r':
        q += "\\r";
        break;
      case '\t':
        q += "\\t";
        break;
      case '\b':
        q += "\\b";
        break;
      case '\f':
        q += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          q += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
        } else {
          q += c;
        }
    }
  }
  q += '"';
  return q;
}

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_ += ',';
    first_.back() = false;
  }
}

JsonWriter& JsonWriter::BeginObject() {
  BeforeValue();
  out_ += '{';
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::EndObject() {
  out_ += '}';
  first_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::BeginArray() {
  BeforeValue();
  out_ += '[';
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::EndArray() {
  out_ += ']';
  first_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  BeforeValue();
  out_ += Quote(key);
  out_ += ':';
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::String(std::string_view value) {
  BeforeValue();
  out_ += Quote(value);
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t value) {
  BeforeValue();
  out_ += absl::StrFormat("%d", value);
  return *this;
}

JsonWriter& JsonWriter::UInt(uint64_t value) {
  BeforeValue();
  out_ += absl::StrFormat("%d", value);
  return *this;
}

std::string JsonWriter::Number(double value) {
  if (!std::isfinite(value)) return "null";
  return absl::StrFormat("%.17g", value);
}

JsonWriter& JsonWriter::Double(double value) {
  BeforeValue();
  out_ += Number(value);
  return *this;
}

JsonWriter& JsonWriter::Bool(bool value) {
  BeforeValue();
  out_ += value ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::Null() {
  BeforeValue();
  out_ += "null";
  return *this;
}

JsonWriter& JsonWriter::OptionalUInt(std::optional<uint64_t> value) {
  return value ? UInt(*value) : Null();
}

}  // namespace dmalab

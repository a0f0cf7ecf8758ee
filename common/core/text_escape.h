// Escaping of untrusted text (names and labels from scenario files) for one-line reports and
// error messages, and strict UTF-8 validation, shared with the JSON writer.
#ifndef DMALAB_COMMON_CORE_TEXT_ESCAPE_H_
#define DMALAB_COMMON_CORE_TEXT_ESCAPE_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace dmalab {

// The length (1..4) of the well-formed UTF-8 sequence that starts at s[i] (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF), or 0 when the bytes there are not one.
size_t Utf8SequenceLength(std::string_view s, size_t i);

// `s` made safe to print on one line: a backslash becomes \\, newline, carriage return and tab
// become \n, \r, \t, every other control character (U+0000..U+001F, U+007F, U+0080..U+009F)
// and every byte that is not part of well-formed UTF-8 becomes \xHH (one per byte). Other text,
// non-ASCII included, is kept. The result never contains a control character or invalid UTF-8.
std::string EscapeText(std::string_view s);

}  // namespace dmalab

#endif  // DMALAB_COMMON_CORE_TEXT_ESCAPE_H_

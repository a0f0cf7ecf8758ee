// Early returns on errors from absl::Status and absl::StatusOr, in the style of Abseil's own
// internal macros (which Abseil does not export). The project's one way to return early: an error
// passed on as it is goes through these macros; one that is changed on its way (a prefix saying
// where it happened, another code, a function that does not return a Status) is an explicit
// `if (!x.ok()) return ...;`, with Prefixed below where it only gains a prefix.
#ifndef DMALAB_COMMON_CORE_STATUS_MACROS_H_
#define DMALAB_COMMON_CORE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace dmalab {

// `s` with `prefix` before its message, its code kept; an OK status stays OK. E.g.
//   DMALAB_RETURN_IF_ERROR(Prefixed("--json: ", WriteTextFile(path, text)));
//   if (!r.ok()) return Prefixed(absl::StrFormat("%s: ", verb), r.status());
// The first builds its prefix whether or not the call failed: right for a literal or off the hot
// paths; a formatted prefix on a hot path belongs in the second, built only on failure.
inline absl::Status Prefixed(absl::string_view prefix, const absl::Status& s) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(prefix, s.message()));
}

}  // namespace dmalab

// Returns the absl::Status `expr` from the enclosing function unless it is OK. Variadic so that
// braced arguments with commas (`Check(x, {"copy", label})`) pass through.
#define DMALAB_RETURN_IF_ERROR(...)                                            \
  do {                                                                         \
    if (::absl::Status dmalab_status_ = (__VA_ARGS__); !dmalab_status_.ok()) { \
      return dmalab_status_;                                                   \
    }                                                                          \
  } while (0)

// Evaluates `expr`, an absl::StatusOr; returns its status from the enclosing function unless it
// is OK, else assigns its value to `lhs`. `lhs` may declare a variable (`const int n`,
// `auto node`) or name an existing one (`t.gpus`), hence several statements: brace it when it is
// the body of an if or a loop. At most one per line (the temporary is named after the line).
// `expr` is variadic, as in DMALAB_RETURN_IF_ERROR; `lhs` takes no unbracketed comma.
#define DMALAB_ASSIGN_OR_RETURN(lhs, ...) \
  DMALAB_ASSIGN_OR_RETURN_IMPL_(DMALAB_STATUS_CONCAT_(dmalab_statusor_, __LINE__), lhs, __VA_ARGS__)

// Implementation details of the macros above.
#define DMALAB_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, ...)  \
  auto statusor = (__VA_ARGS__);                           \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = *std::move(statusor)
#define DMALAB_STATUS_CONCAT_INNER_(a, b) a##b
#define DMALAB_STATUS_CONCAT_(a, b) DMALAB_STATUS_CONCAT_INNER_(a, b)

#endif  // DMALAB_COMMON_CORE_STATUS_MACROS_H_

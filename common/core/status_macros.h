// Early returns on errors from absl::Status and absl::StatusOr, in the style of Abseil's own
// internal macros (which Abseil does not export).
#ifndef DMALAB_COMMON_CORE_STATUS_MACROS_H_
#define DMALAB_COMMON_CORE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns the absl::Status `expr` from the enclosing function unless it is OK.
#define DMALAB_RETURN_IF_ERROR(expr)                                  \
  do {                                                                \
    if (absl::Status dmalab_status_ = (expr); !dmalab_status_.ok()) { \
      return dmalab_status_;                                          \
    }                                                                 \
  } while (0)

// Evaluates `expr`, an absl::StatusOr; returns its status from the enclosing function unless it
// is OK, else assigns its value to `lhs`. `lhs` may declare a variable (`const int n`,
// `auto node`) or name an existing one (`t.gpus`), hence several statements: brace it when it is
// the body of an if or a loop. At most one per line (the temporary is named after the line).
#define DMALAB_ASSIGN_OR_RETURN(lhs, expr) \
  DMALAB_ASSIGN_OR_RETURN_IMPL_(DMALAB_STATUS_CONCAT_(dmalab_statusor_, __LINE__), lhs, expr)

// Implementation details of the macros above.
#define DMALAB_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = *std::move(statusor)
#define DMALAB_STATUS_CONCAT_INNER_(a, b) a##b
#define DMALAB_STATUS_CONCAT_(a, b) DMALAB_STATUS_CONCAT_INNER_(a, b)

#endif  // DMALAB_COMMON_CORE_STATUS_MACROS_H_

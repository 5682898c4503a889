#pragma once

// RETURN_IF_ERROR and ASSIGN_OR_RETURN: abseil uses the pair internally but does not
// export it, and without them every call that can fail costs three lines.

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

/// Returns the status of `expr` from the enclosing function when it is not OK.
#define RETURN_IF_ERROR(expr)                                                                \
  do {                                                                                       \
    if (::absl::Status tandem_status_ = (expr); !tandem_status_.ok()) return tandem_status_; \
  } while (false)

#define TANDEM_STATUS_CONCAT_INNER(a, b) a##b
#define TANDEM_STATUS_CONCAT(a, b) TANDEM_STATUS_CONCAT_INNER(a, b)

/// `ASSIGN_OR_RETURN(auto x, f());` declares (or assigns) `x` from an OK StatusOr, and
/// returns its status from the enclosing function otherwise.
#define ASSIGN_OR_RETURN(lhs, expr) \
  TANDEM_ASSIGN_OR_RETURN_IMPL(TANDEM_STATUS_CONCAT(tandem_statusor_, __LINE__), lhs, expr)
#define TANDEM_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr)  \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = *std::move(statusor)

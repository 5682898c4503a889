#pragma once

// What a step that ended with a non-finite loss left in the module's variables: which of
// them hold a NaN or an infinity (on this process's devices), for the line that stops the
// run. Read once, after the stop, so it costs the steps nothing.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/executor.h"

namespace tandem::runtime {

struct NonFiniteVariables {
  /// The variables (not the fed ones such as @lr_scale) holding a NaN or an infinity on
  /// some device of this process, in module order: a model's layers first to last.
  std::vector<std::string> names;
  int64_t checked = 0;  // variables looked at
  /// Of names[0], on the first device where it is non-finite: how many of its values are.
  int64_t first_bad_values = 0, first_values = 0;
};

/// Scans every variable replica of this process's devices (f32 and bf16 ones).
absl::StatusOr<NonFiniteVariables> findNonFiniteVariables(const Executor& ex);

}  // namespace tandem::runtime

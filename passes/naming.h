#pragma once

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace tandem::passes {

/// Name of the replica of `base` on device number `d`: "conv1.0".
inline std::string replicaName(absl::string_view base, size_t d) {
  return absl::StrCat(base, ".", d);
}

/// Inserts `tag` before a replica suffix: ("w.grad.1", 1, "sum") -> "w.grad.sum.1", and
/// appends it when there is no such suffix.
inline std::string tagReplica(absl::string_view name, size_t d, absl::string_view tag) {
  std::string suffix = absl::StrCat(".", d);
  if (absl::ConsumeSuffix(&name, suffix)) return absl::StrCat(name, ".", tag, suffix);
  return absl::StrCat(name, ".", tag);
}

/// The name without its replica suffix: ("x.1", 1) -> "x".
inline std::string stripReplica(absl::string_view name, size_t d) {
  absl::ConsumeSuffix(&name, absl::StrCat(".", d));
  return std::string(name);
}

}  // namespace tandem::passes

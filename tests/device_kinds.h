#pragma once

// Device kinds by name in tests (the IR names kinds, it does not enumerate them).

#include <cstdlib>

#include "absl/strings/string_view.h"
#include "ir/types.h"

namespace tandem::testing {

/// The device kind named `name` ("cpu", "cuda").
inline ir::DeviceKind kind(absl::string_view name) {
  absl::StatusOr<ir::DeviceKind> k = ir::DeviceKind::named(name);
  if (!k.ok()) std::abort();
  return *k;
}

}  // namespace tandem::testing

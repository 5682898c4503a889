#pragma once

// The values `initialize` gives a variable. They depend only on the run's seed and the
// variable's name (never on the device, the node order or the thread), so every device,
// for any device count, starts from identical parameters; the CUDA backend can fill a
// host buffer here and copy it over.

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "ir/ir.h"

namespace tandem::backend {

/// Seed of one variable's random stream: FNV-1a 64 of the name, mixed with the run's seed
/// through splitmix64. Written out rather than std::hash so it is the same everywhere.
uint64_t variableSeed(uint64_t run_seed, absl::string_view name);

/// Checks that `var` can be filled: f32 for every kind, i32 also for zeros and ones, and
/// rank >= 2 for kaiming (it needs a fan-in). The error names the variable.
absl::Status checkInitializer(const ir::Var& var);

/// Standard deviation of a random initializer (mean 0): `std` for normal, sqrt(2 / fan_in)
/// for kaiming with fan_in the product of all dims but the first (w[O,C,K,K] -> C*K*K,
/// w[O,I] -> I). 0 for zeros and ones.
double initializerStd(const ir::Var& var);

/// Fills `data` (var.type's element count, dtype and layout) with the variable's initial
/// value. `var` must have passed checkInitializer.
void fillInitializer(const ir::Var& var, uint64_t run_seed, void* data);

}  // namespace tandem::backend

#pragma once

// `tandem train --module FILE.tir`: a compiled module read from text (tandem dump's, with
// its execution plan, perhaps edited or run through tandem opt) trains in place of the one
// the model flags compile to.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ir/ir.h"

namespace tandem::tools {

/// The module in `path`, parsed and verified, its plan too (fresh, sound), and checked to
/// be of the kind `compiled` is (what the flags compile to): the same name, devices,
/// variables and graph inputs, so that the data, the header and the checkpoints the flags
/// describe fit it. Errors begin "--module PATH: " and say what is missing or differs.
absl::StatusOr<std::unique_ptr<ir::Module>> readModuleToTrain(const std::string& path,
                                                              const ir::Module& compiled);

}  // namespace tandem::tools

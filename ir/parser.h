#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/ir.h"

namespace tandem::ir {

/// Parses the textual IR written by printModule (docs/IR.md). Errors are
/// "FILE:LINE:COL: message" and never abort, whatever the input. The result is not
/// verified; run the verifier when the text comes from outside.
absl::StatusOr<std::unique_ptr<Module>> parseModule(absl::string_view text,
                                                    absl::string_view filename = "<input>");

/// Reads and parses a file; a missing or unreadable file is an error naming it.
absl::StatusOr<std::unique_ptr<Module>> parseModuleFile(const std::string& path);

}  // namespace tandem::ir

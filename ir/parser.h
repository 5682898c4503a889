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

/// Reads and parses a file ("-": standard input, named "<stdin>" in messages). A missing,
/// unreadable or closed file, or a directory, is an error naming it and the reason.
absl::StatusOr<std::unique_ptr<Module>> parseModuleFile(const std::string& path);

}  // namespace tandem::ir

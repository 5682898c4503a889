#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "passes/pass.h"

namespace tandem::passes {

/// One registered pass: how pipelines name it and how to make it from options.
struct PassInfo {
  absl::string_view name;
  absl::string_view summary;
  absl::string_view options;  // "lr=0.1, momentum=0, weight-decay=0"
  absl::StatusOr<std::unique_ptr<Pass>> (*create)(PassOptions&);
};

/// Every pass, in pipeline order. This is the one place passes are registered.
const std::vector<PassInfo>& registeredPasses();

/// Makes a pass by name; an unknown name is an error listing the known ones.
absl::StatusOr<std::unique_ptr<Pass>> createPass(absl::string_view name, PassOptions& opts);

}  // namespace tandem::passes

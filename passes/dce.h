#pragma once

#include "passes/pass.h"

namespace tandem::passes {

/// `dce`: removes nodes whose results nobody uses and that write no state (inputs stay:
/// they are the graph's signature).
class DeadCodeElimination final : public Pass {
 public:
  static constexpr absl::string_view kName = "dce";
  static absl::StatusOr<std::unique_ptr<Pass>> create(PassOptions& opts);

  absl::string_view name() const override { return kName; }
  absl::StatusOr<bool> run(ir::Module& m) override;
};

}  // namespace tandem::passes

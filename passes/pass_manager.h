#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ir/ir.h"
#include "passes/pass.h"

namespace tandem::passes {

/// Time and effect of one pass in the last run.
struct PassTiming {
  std::string pass;
  double seconds = 0;
  bool changed = false;
  size_t nodes_after = 0;
};

struct PassManagerOptions {
  /// Run the verifier after every pass (turn off only for benchmarks).
  bool verify = true;
  /// Call `on_print` after the passes named here ("*" for all).
  std::vector<std::string> print_after;
  std::function<void(const Pass&, const ir::Module&)> on_print;
};

/// Runs passes in order, verifying between them.
class PassManager {
 public:
  explicit PassManager(PassManagerOptions opts = {}) : opts_(std::move(opts)) {}

  void add(std::unique_ptr<Pass> pass) { passes_.push_back(std::move(pass)); }
  /// Appends the passes of a pipeline text (see parsePipeline).
  absl::Status addPipeline(absl::string_view text);
  size_t size() const { return passes_.size(); }
  const std::vector<std::unique_ptr<Pass>>& passes() const { return passes_; }

  /// An error naming each print_after entry that is neither "*" nor a pass of this
  /// pipeline (a misspelt name would otherwise print nothing, silently).
  absl::Status checkPrintAfter() const;

  /// Runs every pass (after checkPrintAfter). A failing pass or verification stops the run with an error
  /// naming the pass ("after replicate: verifier: ...").
  absl::Status run(ir::Module& m);
  const std::vector<PassTiming>& timings() const { return timings_; }
  /// A table of the last run's timings.
  std::string timingReport() const;

 private:
  PassManagerOptions opts_;
  std::vector<std::unique_ptr<Pass>> passes_;
  std::vector<PassTiming> timings_;
};

/// Total nodes over all graphs.
size_t countNodes(const ir::Module& m);

}  // namespace tandem::passes

#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/model.h"
#include "runtime/split_balancer.h"
#include "runtime/trainer.h"
#include "train/compile.h"

namespace tandem::training {

/// `--split auto` for a Trainer: traces the steps its SplitBalancer measures and, when the
/// balancer proposes new weights, recompiles the model with them (replicate's weights)
/// and hands the module to the Trainer, which carries every variable over.
class AutoSplit {
 public:
  AutoSplit(const ModelSpec& spec, CompileOptions options, runtime::Trainer& trainer,
            runtime::SplitBalancer::Options balance = {});

  /// Call after every training step. Returns the new images per device when the split
  /// changed.
  absl::StatusOr<std::optional<std::vector<int64_t>>> afterStep();

  const runtime::SplitBalancer& balancer() const { return balancer_; }
  /// Goes on from a checkpoint's balancer state (the split itself is compiled in already).
  void restore(const runtime::SplitBalancer::State& state);
  /// Images per device of the module running now.
  std::vector<int64_t> rows() const;

 private:
  ModelSpec spec_;
  CompileOptions options_;
  runtime::Trainer& trainer_;
  runtime::SplitBalancer balancer_;
};

}  // namespace tandem::training

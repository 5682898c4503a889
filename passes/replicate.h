#pragma once

#include <vector>

#include "ir/types.h"
#include "passes/pass.h"

namespace tandem::passes {

/// `replicate{devices=[cpu:0,cpu:1],weights=[3,1]}` (or devices=N for cpu:0..N-1): one copy
/// of every graph per device, each fed its slice of the batch. Slices are even, the
/// remainder going to the first devices (256 on 3 devices: 86/85/85), or proportional to
/// `weights`. Shapes are re-inferred per replica; the loss keeps the global divisor, so
/// the per-device gradients add up to the single-device gradient exactly. The replicas
/// read per-device inputs "%x.0", "%x.1"...; insert-collectives then feeds them by split.
class Replicate final : public Pass {
 public:
  static constexpr absl::string_view kName = "replicate";
  static absl::StatusOr<std::unique_ptr<Pass>> create(PassOptions& opts);
  Replicate(std::vector<ir::Device> devices, std::vector<double> weights)
      : devices_(std::move(devices)), weights_(std::move(weights)) {}

  absl::string_view name() const override { return kName; }
  absl::StatusOr<bool> run(ir::Module& m) override;
  std::string optionsText() const override;

 private:
  std::vector<ir::Device> devices_;
  std::vector<double> weights_;
};

/// Splits `batch` over `devices` parts: even with the remainder to the first parts, or
/// proportional to `weights` (largest remainder). Every part gets at least one sample;
/// a batch smaller than the device count is an error saying so.
absl::StatusOr<std::vector<int64_t>> splitBatch(int64_t batch, size_t devices,
                                                const std::vector<double>& weights);

}  // namespace tandem::passes

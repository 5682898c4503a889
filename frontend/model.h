#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/builder.h"
#include "ir/ir.h"
#include "ir/optimizer_configs.h"

namespace tandem {

/// Settings that train a model well in about 10 epochs; what `tandem train` and
/// `tandem dump` use where a flag is not given. The lessons' settings stay a flag away.
struct TrainingDefaults {
  /// The optimizer and its values (a struct per optimizer op of ir/ops.td, its fields the
  /// op's hyper-parameters, each defaulting to the op's preset: PyTorch's).
  ir::OptimizerConfig optimizer = ir::SgdConfig{};
  /// --schedule and --warmup, the warmup in epochs (the CLI turns it into steps).
  std::string schedule = "constant";
  int64_t warmup_epochs = 0;
  ir::Initializer weight_init{ir::Initializer::Kind::kKaiming};
  /// --label-smoothing: the training loss's (BuildOptions::label_smoothing).
  double label_smoothing = 0;
};

/// A classifier written with the DSL: images of one shape in, class scores out.
struct ModelSpec {
  std::string name;
  /// Shape of one image, [C,H,W].
  std::vector<int64_t> image_shape;
  int64_t num_classes = 10;
  TrainingDefaults defaults;
  /// Builds the network on a batch of images and returns the logits [N, num_classes].
  /// Called once for the training step and once for the evaluation step.
  std::function<Tensor(Builder&, Tensor images)> forward;
};

/// The largest global batch a module can be built for (shapes stay far from overflow).
constexpr int64_t kMaxBatch = int64_t{1} << 31;

}  // namespace tandem

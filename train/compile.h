#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "frontend/model.h"
#include "ir/ir.h"
#include "passes/pass_manager.h"
#include "passes/pipeline.h"
#include "train/setting.h"

namespace tandem::training {

/// Everything that decides the module a model compiles to: how it is built (global batch,
/// initializer) and the default pipeline's settings (devices, split, SGD, buckets).
struct CompileOptions {
  BuildOptions build;
  passes::PipelineConfig pipeline;
  /// Stop after this pass of the default pipeline; "" runs all of it, "none" none.
  std::string stop_after;
  /// Verify after every pass (off only for benchmarks).
  bool verify = true;
};

/// The model's own training defaults (lr, momentum, weight decay, initializer) with the
/// rest of `options` as given: what the CLI starts from before its flags.
CompileOptions withModelDefaults(const ModelSpec& spec, CompileOptions options = {});

/// Builds `spec` with the DSL and runs the default pipeline over it: the module the
/// runtime executes. `pm_out`, when given, receives the pass manager (for timing reports).
/// Errors name the layer, pass or setting at fault (settings as `names` says).
absl::StatusOr<std::unique_ptr<ir::Module>> compileModel(
    const ModelSpec& spec, const CompileOptions& options,
    std::unique_ptr<passes::PassManager>* pm_out = nullptr,
    const SettingNames& names = settingKeys());

/// Builds `spec`'s prediction module (frontend/build_module.h's buildPredictModule: the
/// forward in inference mode and the variables it reads, nothing else) for a global batch
/// of `batch` and runs the prediction pipeline over it (passes/pipeline.h's
/// predictPipeline with `pipeline`'s devices, split, precision, fusion and layouts): split
/// across the devices, each device's rows of the outputs left on it.
absl::StatusOr<std::unique_ptr<ir::Module>> compilePrediction(const ModelSpec& spec, int64_t batch,
                                                              passes::PipelineConfig pipeline);

/// Makes a module without a training step (an imported model's @init and @infer) runnable
/// on `devices`: the default pipeline from replicate on (insert-collectives, dce,
/// schedule and the execution plan), no autodiff and no optimizer.
absl::Status compileInference(ir::Module& module, const std::vector<ir::Device>& devices);

/// OK when this build has a backend for every device of this process (rank 0's: another
/// process checks its own) and the machine has the device; else why not, naming the
/// device ("cuda:0: ..."), for the caller to put its flag in front.
absl::Status checkDevicesRunHere(const std::vector<ir::Device>& devices);

}  // namespace tandem::training

#pragma once

// Building a model's module with the DSL: the compiler's entry into the frontend (the
// training library's compileModel, the ONNX importer, tests). Not part of the public API
// and not installed: a user trains a ModelSpec through tandem/tandem.h.

#include <memory>

#include "absl/status/statusor.h"
#include "frontend/model.h"
#include "ir/ir.h"

namespace tandem {

/// Builds the module of a classifier: variables; `init` (initialize and assign every
/// variable); `train_step(%x, %y)` returning the mean softmax cross-entropy loss and the
/// count of correct predictions, with batch norm in training mode; `eval_step(%x, %y)`
/// returning the summed loss and the correct count with batch norm in inference mode.
/// autodiff later turns train_step into a full training step. The first model error
/// (a shape mismatch, say) is returned naming the layer and its source line.
absl::StatusOr<std::unique_ptr<ir::Module>> buildModule(const ModelSpec& spec,
                                                        const BuildOptions& opts);

/// Builds the module that predicts with `spec` (ModelSpec::predict): one graph,
/// @predict_step (ir/predict_graph.h), over the inputs the prediction reads, returning its
/// outputs, each [batch, ...], built in inference mode (batch norm on running statistics,
/// no dropout); and only the variables that graph reads: no @init (the values come from a
/// checkpoint or a trained model) and no optimizer state. Errors name the model and the
/// input or output at fault.
absl::StatusOr<std::unique_ptr<ir::Module>> buildPredictModule(const ModelSpec& spec,
                                                               const BuildOptions& opts);

/// Fills `g` (a module's @init) with an `initialize` and an `assign` per variable: every
/// variable gets its initializer's value.
absl::Status buildInitGraph(ir::Module& m, ir::Graph& g);

}  // namespace tandem

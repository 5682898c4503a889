#pragma once

// ONNX import: an ONNX graph becomes the DSL's forward graph. Each node is converted by
// the entry of its op in the converter table (onnx_ops.cc) into ops of ir/ops.td through
// the Builder, so an imported graph is a graph like any the DSL builds: the same passes,
// runtime and training loop run on it. Initializers become parameters (BatchNormalization's
// running statistics buffers) whose values the importer hands back; values known when the
// model is imported (Constant, Shape, and the index arithmetic on them) are computed here
// rather than at run time, as shapes are concrete in Tandem.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/builder.h"
#include "frontend/onnx/onnx_file.h"
#include "ir/ir.h"

namespace tandem::onnx_import {

/// A data input of the model: a graph input that no initializer gives a value.
struct ModelInput {
  std::string name;
  int32_t elem_type = 0;
  /// -1 where the model leaves a dimension open (a named batch dimension).
  ir::Shape shape;
};
std::vector<ModelInput> modelInputs(const OnnxModel& model);
std::vector<std::string> modelOutputs(const OnnxModel& model);

/// What each imported variable starts from (f32, the variable's shape), by variable name.
using VarValues = std::map<std::string, std::vector<float>>;

/// A name as a Tandem identifier ([A-Za-z0-9_.]; other characters become '_'):
/// "onnx::Conv_12" is "onnx__Conv_12".
std::string identifierFor(absl::string_view onnx_name);

/// Emits `model`'s graph into the builder's current graph on `inputs` (a tensor per data
/// input, by ONNX name, or its value in `known`) and returns the graph's outputs in order.
/// With `known_outputs`, an output that is not float and known at import (a Shape's) goes
/// there by its position, its tensor left empty; without, it is unsupported. Variables' values go
/// to `values`. Every node whose op (or the way it uses it) Tandem does not support is named in one
/// kUnimplemented error, found before anything is built past the op check; other errors name the
/// node at fault.
absl::StatusOr<std::vector<Tensor>> emitGraph(
    const OnnxModel& model, Builder& b, const std::map<std::string, Tensor>& inputs,
    VarValues* values, const std::map<std::string, OnnxTensor>& known = {},
    std::map<size_t, OnnxTensor>* known_outputs = nullptr);

/// The graph a model imported for inference computes in: it reads the model's data
/// inputs from variables of role `fed` named after them (identifierFor), which the
/// runner writes before each run, and returns the model's outputs.
inline constexpr absl::string_view kInferGraph = "infer";

struct ImportOptions {
  /// Concrete shapes of data inputs, by ONNX name: required where the model leaves a
  /// dimension open, and otherwise equal to the model's.
  std::map<std::string, ir::Shape> input_shapes;
  /// Values of inputs that are not float, by ONNX name: known when the model is imported
  /// (a Reshape's shape, a ReduceSum's axes, given as inputs in ONNX's test data), they are
  /// taken as constants of the graph. Float inputs stay inputs.
  std::map<std::string, OnnxTensor> known_inputs;
  /// How the user of the command that imports sets a dimension the model leaves open,
  /// said when one is not set: "give --batch N" (import), "give the input (its file's
  /// shape sets it)" (run). The importer serves every command, so each passes its own.
  std::string open_dimension_remedy;
};

struct ImportedModel {
  /// Graphs @init (every variable) and @infer; the inputs' variables first, in order.
  std::unique_ptr<ir::Module> module;
  VarValues values;
  /// ONNX names of the inputs (their variables in order) and of the model's outputs:
  /// @infer's, and between them those known at import (integer ones: a Shape's), by
  /// position in `known_outputs`.
  std::vector<std::string> inputs, outputs;
  std::map<size_t, OnnxTensor> known_outputs;
  /// Each output's ONNX element type: a double one (and a double input) is computed in f32
  /// and written back as double by `tandem run`.
  std::vector<int32_t> output_types;
};

/// The model as a module that runs inference (uncompiled: the inference pipeline,
/// train/compile.h, makes it runnable).
absl::StatusOr<ImportedModel> importModel(const OnnxModel& model, const ImportOptions& options);

/// The concrete shape of `input`: its model shape with `given` (when set) checked against
/// it; an error names the input and the dimension (and `remedy`, for one left open).
absl::StatusOr<ir::Shape> concreteShape(const ModelInput& input, const ir::Shape* given,
                                        const std::string& model_path,
                                        const std::string& remedy = "");

}  // namespace tandem::onnx_import

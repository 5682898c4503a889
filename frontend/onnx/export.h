#pragma once

// ONNX export: a model's inference graph (the @eval_step a model builds, before any pass)
// as an onnx::ModelProto, written with libonnx's generated classes. Each node of the
// graph that the requested outputs depend on becomes ONNX nodes of the default domain at
// opset kExportOpset; variables become initializers holding the values given (a trained
// checkpoint's). Inference batch norm that follows a convolution is folded into that
// convolution's weights and bias, as fuse-conv-bn-relu's @eval_step folds it at run time
// (the same arithmetic, so the folded weights are the eval step's bits); where it may not
// be folded it stays a BatchNormalization node (see canFold in export.cc).

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.h"
#include "onnx/onnx_pb.h"

namespace tandem::onnx_export {

/// Opset 17: the newest torch.onnx.export of PyTorch 1.13 writes and libonnx 1.12 checks;
/// the first with LayerNormalization (ReduceMean still takes its axes as an attribute).
inline constexpr int64_t kExportOpset = 17;

/// f32 values of variables, by name (each the variable's shape, row-major).
using VarValues = std::map<std::string, std::vector<float>>;

struct ExportReport {
  /// Scopes of the batch norms folded into their convolutions, and of those kept as
  /// BatchNormalization nodes with the reason.
  std::vector<std::string> folded_batch_norms, kept_batch_norms;
};

/// A graph's values exported: `inputs` become the ONNX graph's inputs and `outputs` its
/// outputs, each under the name given beside it (in that order); everything the outputs
/// depend on becomes nodes and initializers. Errors name the node whose op (or use of
/// it) has no ONNX form here, or the variable whose value is missing or of another size.
struct NamedValue {
  const ir::Value* value;
  std::string name;
};
absl::StatusOr<onnx::ModelProto> exportGraph(const ir::Graph& graph,
                                             const std::vector<NamedValue>& inputs,
                                             const std::vector<NamedValue>& outputs,
                                             const VarValues& values,
                                             ExportReport* report = nullptr);

/// The classifier a model built by frontend/model.h holds: @eval_step's images "x" in,
/// the logits its loss reads out as "logits" (the loss and accuracy left out).
absl::StatusOr<onnx::ModelProto> exportClassifier(const ir::Module& module, const VarValues& values,
                                                  ExportReport* report = nullptr);

}  // namespace tandem::onnx_export

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
///
/// With `other_batch`, the same graph built for another batch size (node for node: the
/// DSL builds deterministically), the batch is symbolic: an axis whose size differs
/// between the two is the batch's, written as the dimension "N" of the inputs and
/// outputs, and taken from a tensor's Shape where an Expand needs it. Shapes are concrete
/// in Tandem, so this is how export tells the batch axis from a size that only equals it.
/// A node that holds the batch's size in an attribute (a reshape not written with -1, a
/// slice along the batch) or a batch axis other than the first is an error then.
struct NamedValue {
  const ir::Value* value;
  std::string name;
};
absl::StatusOr<onnx::ModelProto> exportGraph(const ir::Graph& graph,
                                             const std::vector<NamedValue>& inputs,
                                             const std::vector<NamedValue>& outputs,
                                             const VarValues& values,
                                             ExportReport* report = nullptr,
                                             const ir::Graph* other_batch = nullptr);

/// The classifier a model built by frontend/model.h holds: @eval_step's images "x" in,
/// the logits its loss reads out as "logits" (the loss and accuracy left out). With
/// `other_batch`, the same model built for another batch, the batch is symbolic (N).
absl::StatusOr<onnx::ModelProto> exportClassifier(const ir::Module& module, const VarValues& values,
                                                  ExportReport* report = nullptr,
                                                  const ir::Module* other_batch = nullptr);

}  // namespace tandem::onnx_export

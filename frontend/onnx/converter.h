#pragma once

// What an op's converter (onnx_ops.cc) sees of the import: the node's attributes, its
// inputs as tensors of the graph being built or as values known at import time, and the
// place to put its outputs. A converter returns kUnimplemented (unsupported()) for a use
// of its op Tandem cannot express; the importer collects those, one line for all.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "frontend/builder.h"
#include "frontend/onnx/onnx_file.h"
#include "ir/ir.h"

namespace tandem::onnx_import {

class NodeContext {
 public:
  virtual ~NodeContext() = default;
  virtual const onnx::NodeProto& node() const = 0;
  /// The version of the op's schema the model's opset selects (Softmax-11 or -13).
  virtual int version() const = 0;
  virtual Builder& builder() = 0;

  // --- attributes (an attribute of the wrong type is an error naming it) ---
  bool hasAttr(absl::string_view name) const;
  absl::StatusOr<int64_t> attrInt(absl::string_view name, int64_t dflt) const;
  absl::StatusOr<float> attrFloat(absl::string_view name, float dflt) const;
  absl::StatusOr<std::vector<int64_t>> attrInts(absl::string_view name,
                                                std::vector<int64_t> dflt = {}) const;
  absl::StatusOr<std::string> attrString(absl::string_view name, std::string dflt) const;
  /// The attribute's proto, or null.
  const onnx::AttributeProto* attr(absl::string_view name) const;

  // --- inputs ---
  /// Whether input i is given (ONNX leaves optional inputs out or names them "").
  bool hasInput(size_t i) const;
  /// Whether input i's value is known now (an initializer, a constant, or computed from
  /// them); its value then.
  virtual bool isConstant(size_t i) const = 0;
  virtual absl::StatusOr<const OnnxTensor*> constant(size_t i) = 0;
  /// Whether input i is one of the model's initializers (through Identity too): a weight,
  /// which stays a variable that training updates. A known value computed from constants
  /// is not (it becomes a buffer where a tensor of the graph reads it).
  virtual bool isWeight(size_t i) const = 0;
  /// Input i as a tensor of the graph; a known value becomes a variable of `role`
  /// (initialized as `init` under --reinit; unset: Kaiming for rank >= 2, else zeros).
  virtual absl::StatusOr<Tensor> tensor(size_t i, ir::VarRole role = ir::VarRole::kParam,
                                        std::optional<ir::Initializer> init = std::nullopt) = 0;
  /// A value computed at import time (a negated subtrahend) as a tensor of the graph: a
  /// buffer variable named after value.name.
  virtual absl::StatusOr<Tensor> tensorOf(OnnxTensor value) = 0;
  /// Input i's shape (a tensor's or a known value's).
  virtual absl::StatusOr<ir::Shape> shape(size_t i) = 0;
  /// Input i's element type (onnx::TensorProto::DataType).
  virtual absl::StatusOr<int32_t> elemType(size_t i) = 0;

  // --- outputs ---
  size_t numOutputs() const { return size_t(node().output_size()); }
  /// Whether output i is asked for (named, not "").
  bool wantsOutput(size_t i) const {
    return int(i) < node().output_size() && !node().output(int(i)).empty();
  }
  virtual void setOutput(size_t i, Tensor t) = 0;
  virtual void setOutput(size_t i, OnnxTensor value) = 0;
  /// Output i is `t` broadcast to `shape` (Expand), left unexpanded: only for an output
  /// that its readers broadcast themselves (readers()), to whom shape() says `shape`.
  virtual void setBroadcastOutput(size_t i, Tensor t, ir::Shape shape) = 0;
  /// Output i is `t` [N,C,H,W] with `pad` rows and columns of zeros on each side (a Pad),
  /// left unpadded: only for an output that convolutions and average pools alone read,
  /// which take the padding into their own (inputPadding); shape() says the padded shape.
  virtual void setPaddedOutput(size_t i, Tensor t, int64_t pad) = 0;
  /// The zero padding input i leaves to its reader (setPaddedOutput); 0 for any other.
  virtual int64_t inputPadding(size_t i) const = 0;
  /// The nodes that read output i, in graph order (each once), and whether it is also an
  /// output of the graph.
  virtual std::vector<const onnx::NodeProto*> readers(size_t i) const = 0;
  virtual bool isGraphOutput(size_t i) const = 0;
  /// Output `out` is input `in` itself (Identity; Dropout at inference): a known value
  /// stays known and keeps its variable.
  virtual absl::Status alias(size_t in, size_t out) = 0;

  /// Adds a node to the graph, named after this ONNX node; its result `result`.
  virtual Tensor emit(ir::NodeSpec spec, size_t result = 0) = 0;

  /// Output i's shape where the model, whose batch is open, is imported at another batch
  /// size too (the importer does so before the import proper): the dimensions that differ
  /// from this import's depend on the batch. Unset where the batch is fixed in the model
  /// or that other import failed.
  struct OtherBatch {
    ir::Shape shape;    // output i's shape at `other_batch`
    int64_t batch = 0;  // this import's batch size
    int64_t other_batch = 0;
  };
  virtual std::optional<OtherBatch> atOtherBatch(size_t i) const = 0;
  /// The same for input i.
  virtual std::optional<OtherBatch> inputAtOtherBatch(size_t i) const = 0;

  /// The status a converter returns for a use of its op Tandem does not support.
  static absl::Status unsupported(absl::string_view why) { return absl::UnimplementedError(why); }
  /// An error in the model itself (an attribute out of its range).
  static absl::Status invalid(absl::string_view why) { return absl::InvalidArgumentError(why); }
};

/// Converts one node: sets every output it is asked for.
using Converter = std::function<absl::Status(NodeContext&)>;

struct OpConverter {
  /// The oldest version of the op's schema the converter knows (it refuses older ones).
  int min_version = 1;
  Converter convert;
  /// The newest version it knows (it refuses newer ones); 0: every newer one.
  int max_version = 0;
};

/// The converter of ONNX op `op_type` (default domain), or null.
const OpConverter* findConverter(const std::string& op_type);
/// The converter of a fused node's op type (patterns.h: kFusedGelu, kFusedLayerNorm), or null.
const OpConverter* findFusedConverter(const std::string& op_type);
/// Every op type with a converter (docs/ONNX.md).
std::vector<std::string> supportedOps();

}  // namespace tandem::onnx_import

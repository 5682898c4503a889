#pragma once

// Reading ONNX files: a model (ModelProto) checked by ONNX's own checker and shape
// inference, and tensors (TensorProto: initializers, constants, and the input_K.pb /
// output_K.pb files of ONNX's test data and `tandem run`). The protobuf classes are
// libonnx's generated ones (onnx/onnx_pb.h): no parser of ours.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/types.h"
#include "onnx/onnx_pb.h"

namespace tandem::onnx_import {

/// A tensor's values on the host as ONNX holds them, widened: floating types in `floats`,
/// integer and boolean types in `ints` (whichever the element type is; the other empty).
struct OnnxTensor {
  std::string name;
  int32_t elem_type = onnx::TensorProto::FLOAT;  // onnx::TensorProto::DataType
  ir::Shape shape;
  std::vector<float> floats;
  std::vector<int64_t> ints;

  bool isFloat() const {
    return elem_type == onnx::TensorProto::FLOAT || elem_type == onnx::TensorProto::DOUBLE;
  }
  int64_t numElements() const;
  /// Element i as a double, whatever the type.
  double at(int64_t i) const {
    return isFloat() ? double(floats[size_t(i)]) : double(ints[size_t(i)]);
  }
};

/// "float", "int64", ...: an ONNX element type's name for messages.
std::string elemTypeName(int32_t elem_type);

/// The values of `t`; an error names the tensor (`what`: "initializer 'w'") and the field
/// at fault: an element type Tandem cannot read, data held outside the file, a negative
/// dimension, or a value count that does not fit the shape.
absl::StatusOr<OnnxTensor> decodeTensor(const onnx::TensorProto& t, const std::string& what);

/// `t` as a TensorProto (its element type's typed field: int64_data, int32_data, ...).
onnx::TensorProto encodeTensor(const OnnxTensor& t);
/// A TensorProto of f32 values (raw_data, little-endian), named `name`.
onnx::TensorProto encodeF32(const std::string& name, const ir::Shape& shape, const float* data);

/// Values Tandem computed in f32 as the element type `elem_type` a model declares for them:
/// a double as is, a boolean (held as 1 and 0) nonzero, an integer rounded to the nearest.
OnnxTensor fromF32(const std::string& name, int32_t elem_type, const ir::Shape& shape,
                   const float* data);

/// An ONNX TensorProto file (input_0.pb); errors name the file and what is wrong.
absl::StatusOr<OnnxTensor> readTensorFile(const std::string& path);

/// A model read from a file, checked and with the shapes ONNX's inference gives.
struct OnnxModel {
  std::string path;
  onnx::ModelProto proto;
  /// The default domain's opset the model imports.
  int64_t opset = 0;
  /// Every value whose shape ONNX's shape inference knows fully (graph inputs, outputs and
  /// intermediate values), by name: the importer checks Tandem's shapes against them.
  std::map<std::string, ir::Shape> inferred_shapes;
  /// The element type ONNX's shape inference gives each value it types, by name.
  std::map<std::string, int32_t> inferred_types;
};

/// `model`'s inferred shapes (as OnnxModel::inferred_shapes) had its data inputs the
/// shapes `inputs` gives (by name; a batch the model leaves open): ONNX's shape inference
/// run again over a copy. Empty when it fails.
std::map<std::string, ir::Shape> inferShapesAt(const OnnxModel& model,
                                               const std::map<std::string, ir::Shape>& inputs);

/// The ONNX model in `path`: read bounded (ir/file_input.h), parsed, checked with
/// onnx::checker and given inferred shapes. Errors are one line naming the file and the
/// node or field at fault.
absl::StatusOr<std::unique_ptr<OnnxModel>> readOnnxModel(const std::string& path);
/// The same from bytes in memory (the fuzz test); `path` names them in errors.
absl::StatusOr<std::unique_ptr<OnnxModel>> parseOnnxModel(const std::string& bytes,
                                                          const std::string& path);

}  // namespace tandem::onnx_import

#pragma once

// Small ONNX models made in the tests with libonnx's protobuf classes.

#include <cstdint>
#include <string>
#include <vector>

#include "onnx/onnx_pb.h"

namespace tandem::onnx_import {

/// A float input or output; a negative size is a named (open) dimension.
inline onnx::ValueInfoProto floatInput(const std::string& name, std::vector<int64_t> dims) {
  onnx::ValueInfoProto v;
  v.set_name(name);
  auto* t = v.mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) {
    if (d < 0)
      t->mutable_shape()->add_dim()->set_dim_param("N");
    else
      t->mutable_shape()->add_dim()->set_dim_value(d);
  }
  return v;
}

/// A float initializer of `dims`, values start, start + 0.01, ...
inline onnx::TensorProto floats(const std::string& name, std::vector<int64_t> dims, float start) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) {
    t.add_dims(d);
    n *= d;
  }
  for (int64_t i = 0; i < n; ++i) t.add_float_data(start + 0.01f * float(i));
  return t;
}

inline onnx::NodeProto* node(onnx::GraphProto* g, const std::string& op, const std::string& name,
                             std::vector<std::string> in, std::vector<std::string> out) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& s : in) n->add_input(s);
  for (const auto& s : out) n->add_output(s);
  return n;
}

inline void intAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

inline std::string bytesOf(const onnx::ModelProto& m) {
  std::string out;
  m.SerializeToString(&out);
  return out;
}

inline void intsAttr(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

}  // namespace tandem::onnx_import

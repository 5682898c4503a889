#include "frontend/onnx/graph_index.h"

#include "frontend/onnx/onnx_file.h"

namespace tandem::onnx_import {

GraphIndex::GraphIndex(const onnx::GraphProto& g) : g_(g) {
  for (const auto& t : g.initializer()) {
    known_.insert(t.name());
    addScalar(t.name(), t);
  }
  for (const auto& o : g.output()) outputs_.insert(o.name());
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    for (const std::string& in : n.input()) {
      if (in.empty()) continue;
      std::vector<int>& r = readers_[in];
      if (r.empty() || r.back() != i) r.push_back(i);  // Mul(d, d) reads d once
    }
    for (const std::string& out : n.output())
      if (!out.empty()) producer_[out] = i;
    if (is(n, "Constant") && n.output_size() == 1) {
      known_.insert(n.output(0));
      for (const auto& a : n.attribute()) {
        if (a.name() == "value" && a.has_t()) addScalar(n.output(0), a.t());
        if (a.name() == "value_float") scalars_[n.output(0)] = a.f();
        if (a.name() == "value_int") scalars_[n.output(0)] = double(a.i());
      }
    }
    if (is(n, "Identity") && n.input_size() == 1 && n.output_size() == 1 &&
        known_.contains(n.input(0))) {
      known_.insert(n.output(0));
      if (auto s = scalars_.find(n.input(0)); s != scalars_.end())
        scalars_[n.output(0)] = s->second;
    }
  }
}

void GraphIndex::addScalar(const std::string& name, const onnx::TensorProto& t) {
  // Only single elements are scalars: decoding every weight would copy the model once more.
  int64_t elements = 1;
  for (int64_t d : t.dims()) elements *= d;
  if (elements != 1) return;
  absl::StatusOr<OnnxTensor> v = decodeTensor(t, name);
  if (v.ok() && v->numElements() == 1 && (!v->floats.empty() || !v->ints.empty()))
    scalars_[name] = v->at(0);
}

}  // namespace tandem::onnx_import

#include "frontend/onnx/export.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"

namespace tandem::onnx_export {

namespace {

using ir::Node;
using ir::Op;
using ir::Value;

absl::StatusOr<int32_t> onnxType(ir::DType t) {
  switch (t) {
    case ir::DType::kF32:
      return onnx::TensorProto::FLOAT;
    case ir::DType::kBF16:
      return onnx::TensorProto::BFLOAT16;
    case ir::DType::kI32:
      return onnx::TensorProto::INT32;
    case ir::DType::kF64:
      return onnx::TensorProto::DOUBLE;
    case ir::DType::kI64:
      return onnx::TensorProto::INT64;
    default:
      return absl::UnimplementedError(absl::StrCat("dtype ", ir::dtypeName(t)));
  }
}

/// The rest of `n`'s description after the node: what an error about it says.
std::string at(const Node& n) { return absl::StrCat("node ", n.describe()); }

class Exporter {
 public:
  Exporter(const ir::Graph& g, const VarValues& values, ExportReport* report,
           const ir::Graph* other_batch)
      : g_(g), values_(values), report_(report), users_(g.users()) {
    if (other_batch != nullptr)
      for (size_t i = 0; i < g.nodes().size(); ++i)
        other_[g.nodes()[i].get()] = other_batch->nodes()[i].get();
  }

  absl::StatusOr<onnx::ModelProto> run(const std::vector<NamedValue>& inputs,
                                       const std::vector<NamedValue>& outputs) {
    onnx::ModelProto model;
    model.set_ir_version(onnx::IR_VERSION);
    model.set_producer_name("tandem");
    model.add_opset_import()->set_version(kExportOpset);
    gp_ = model.mutable_graph();
    gp_->set_name(g_.module() != nullptr ? g_.module()->name() : g_.name());
    // The graph's own names first, so that nothing else takes them.
    for (const NamedValue& in : inputs) {
      RETURN_IF_ERROR(claim(in.name));
      names_[in.value] = in.name;
      RETURN_IF_ERROR(addValueInfo(gp_->add_input(), in.name, in.value));
    }
    for (const NamedValue& out : outputs) {
      if (names_.contains(out.value))
        return absl::InvalidArgumentError(
            absl::StrCat("output '", out.name, "' is input '", names_[out.value], "' itself"));
      RETURN_IF_ERROR(claim(out.name));
      names_[out.value] = out.name;
    }
    // Only what the outputs depend on: the loss, accuracy and labels of a step are not.
    absl::flat_hash_set<const Node*> needed;
    std::vector<const Value*> stack;
    for (const NamedValue& out : outputs) stack.push_back(out.value);
    while (!stack.empty()) {
      const Value* v = stack.back();
      stack.pop_back();
      if (v->def() == nullptr || !needed.insert(v->def()).second) continue;
      for (const Value* o : v->def()->operands()) stack.push_back(o);
    }
    planFolds(needed);
    // Graph order is a topological order (definitions before uses), as ONNX asks.
    for (const auto& n : g_.nodes())
      if (needed.contains(n.get()) && !skipped_.contains(n.get())) RETURN_IF_ERROR(emit(*n));
    for (const NamedValue& out : outputs)
      RETURN_IF_ERROR(addValueInfo(gp_->add_output(), out.name, out.value));
    return model;
  }

 private:
  // --- names -------------------------------------------------------------------------
  absl::Status claim(const std::string& name) {
    if (!taken_.insert(name).second)
      return absl::InvalidArgumentError(absl::StrCat("the name '", name, "' is given twice"));
    return absl::OkStatus();
  }
  /// A name no tensor of the ONNX graph has yet, from `base`.
  std::string fresh(const std::string& base) {
    std::string name = base.empty() ? std::string("t") : base;
    for (int k = 1; taken_.contains(name); ++k) name = absl::StrCat(base, "_", k);
    taken_.insert(name);
    return name;
  }
  /// The ONNX name of a value of the graph (its IR name where free).
  std::string nameOf(const Value* v) {
    auto it = names_.find(v);
    if (it != names_.end()) return it->second;
    return names_[v] = fresh(v->name());
  }

  /// Whether axis `axis` of `v` grows with the batch: its size differs in the graph built
  /// for another batch (never, when the batch is fixed).
  bool batchAxis(const Value* v, size_t axis) const {
    auto other = v->def() != nullptr ? other_.find(v->def()) : other_.end();
    return other != other_.end() &&
           other->second->result(size_t(v->index()))->type().shape[axis] != v->type().shape[axis];
  }
  bool hasBatchAxis(const Value* v) const {
    for (size_t a = 0; a < v->type().shape.size(); ++a)
      if (batchAxis(v, a)) return true;
    return false;
  }

  absl::Status addValueInfo(onnx::ValueInfoProto* info, const std::string& name, const Value* v) {
    const ir::TensorType& type = v->type();
    info->set_name(name);
    onnx::TypeProto_Tensor* t = info->mutable_type()->mutable_tensor_type();
    ASSIGN_OR_RETURN(const int32_t elem, onnxType(type.dtype));
    t->set_elem_type(elem);
    onnx::TensorShapeProto* shape = t->mutable_shape();
    for (size_t a = 0; a < type.shape.size(); ++a) {
      if (batchAxis(v, a)) {
        if (a != 0)
          return absl::UnimplementedError(absl::StrCat(
              "'", name, "': its axis ", a, " grows with the batch; export with --batch"));
        shape->add_dim()->set_dim_param("N");
      } else {
        shape->add_dim()->set_dim_value(type.shape[a]);
      }
    }
    return absl::OkStatus();
  }

  // --- initializers --------------------------------------------------------------------
  std::string addF32(const std::string& base, const ir::Shape& shape, const float* data,
                     int64_t count) {
    onnx::TensorProto* t = gp_->add_initializer();
    t->set_name(fresh(base));
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape) t->add_dims(d);
    // raw_data is little-endian IEEE floats, which this host's bytes are.
    t->set_raw_data(
        std::string(reinterpret_cast<const char*>(data), size_t(count) * sizeof(float)));
    return t->name();
  }
  std::string addScalar(const std::string& base, float v) { return addF32(base, {}, &v, 1); }
  std::string addInts(const std::string& base, absl::Span<const int64_t> v) {
    onnx::TensorProto* t = gp_->add_initializer();
    t->set_name(fresh(base));
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(int64_t(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
    return t->name();
  }

  /// The value a `param` node reads; an error names the variable and the node.
  absl::StatusOr<const std::vector<float>*> varValue(const Node& param) {
    const std::string& var = ir::ParamView(param).var();
    const ir::Var* v = g_.module() != nullptr ? g_.module()->findVar(var) : nullptr;
    auto it = values_.find(var);
    if (it == values_.end())
      return absl::InvalidArgumentError(
          absl::StrCat("variable @", var, " (read by ", at(param), ") has no value to export"));
    const int64_t want = param.result()->type().numElements();
    if (int64_t(it->second.size()) != want || (v != nullptr && v->type.dtype != ir::DType::kF32))
      return absl::InvalidArgumentError(absl::StrCat("variable @", var, ": ", it->second.size(),
                                                     " values for ",
                                                     ir::toString(param.result()->type())));
    return &it->second;
  }
  /// Whether `v` is a variable's value (a `param` node's result).
  static const Node* paramOf(const Value* v) {
    return v != nullptr && v->def() != nullptr && v->def()->op() == Op::kParam ? v->def() : nullptr;
  }

  // --- batch norm folding ------------------------------------------------------------
  /// Why batch norm `bn` cannot be folded into the node before it ("" when it can). Folding
  /// rewrites the convolution's weights, so the convolution must be the batch norm's alone
  /// and its weights, bias and the batch norm's parameters known values (variables).
  std::string whyNotFold(const Node& bn) {
    const ir::BatchNormView v(bn);
    if (v.training()) return "training mode";
    const Node* conv = v.x()->def();
    if (conv == nullptr || conv->op() != Op::kConv2d)
      return absl::StrCat("its input is no convolution's (",
                          conv == nullptr ? "a graph input" : std::string(conv->opName()), ")");
    auto users = users_.find(v.x());
    if (users == users_.end() || users->second.size() != 1 || isOutput(v.x()))
      return "the convolution's output is read elsewhere too";
    const ir::Conv2dView c(*conv);
    if (c.x()->type().dtype != ir::DType::kF32) return "the convolution is not f32";
    for (const Value* p : {c.w(), c.b(), v.gamma(), v.beta(), v.running_mean(), v.running_var()})
      if (p != nullptr && paramOf(p) == nullptr) return "a weight or statistic is computed";
    return "";
  }
  bool isOutput(const Value* v) const {
    for (const Value* o : g_.outputs())
      if (o == v) return true;
    return false;
  }
  void planFolds(const absl::flat_hash_set<const Node*>& needed) {
    for (const auto& n : g_.nodes()) {
      if (!needed.contains(n.get()) || n->op() != Op::kBatchNorm) continue;
      const std::string why = whyNotFold(*n);
      if (why.empty()) {
        fold_into_[ir::BatchNormView(*n).x()->def()] = n.get();
        skipped_.insert(n.get());
        if (report_) report_->folded_batch_norms.push_back(n->scope());
      } else if (report_) {
        report_->kept_batch_norms.push_back(absl::StrCat(n->scope(), ": ", why));
      }
    }
    // The folded layers' own variables are no initializers: the folded ones replace them.
    auto folded = [&](const Node* user) {
      return fold_into_.contains(user) || skipped_.contains(user);
    };
    for (const auto& n : g_.nodes()) {
      if (!needed.contains(n.get()) || n->op() != Op::kParam) continue;
      auto users = users_.find(n->result());
      if (users != users_.end() && !isOutput(n->result()) &&
          std::all_of(users->second.begin(), users->second.end(), folded))
        skipped_.insert(n.get());
    }
  }

  /// Conv `conv` with batch norm `bn` folded in: w' = w * float(s), b' = (b - mean) * s +
  /// beta, s = gamma / sqrt(var + eps), in double and rounded once: the arithmetic of the
  /// fold_batch_norm kernels (backend/cpu/fused_kernels.cc, backend/cuda/norm_math.h),
  /// so that the exported convolution's weights are the bits the eval step computes with.
  absl::Status emitFoldedConv(const Node& conv, const Node& bn) {
    const ir::Conv2dView c(conv);
    const ir::BatchNormView v(bn);
    ASSIGN_OR_RETURN(const std::vector<float>* w, varValue(*paramOf(c.w())));
    const std::vector<float>* b = nullptr;
    if (c.b() != nullptr) {
      ASSIGN_OR_RETURN(b, varValue(*paramOf(c.b())));
    }
    ASSIGN_OR_RETURN(const std::vector<float>* gamma, varValue(*paramOf(v.gamma())));
    ASSIGN_OR_RETURN(const std::vector<float>* beta, varValue(*paramOf(v.beta())));
    ASSIGN_OR_RETURN(const std::vector<float>* mean, varValue(*paramOf(v.running_mean())));
    ASSIGN_OR_RETURN(const std::vector<float>* var, varValue(*paramOf(v.running_var())));
    const ir::Shape& ws = c.w()->type().shape;
    const int64_t k = ws[0], per = c.w()->type().numElements() / k;
    if (int64_t(gamma->size()) != k)
      return absl::InvalidArgumentError(
          absl::StrCat(at(bn), ": ", gamma->size(), " channels after a convolution of ", k));
    std::vector<float> wf(w->size());
    std::vector<float> bf(static_cast<size_t>(k));
    for (int64_t o = 0; o < k; ++o) {
      const double scale = (*gamma)[o] / std::sqrt(double((*var)[o]) + v.eps());
      const float fs = static_cast<float>(scale);
      for (int64_t i = 0; i < per; ++i) wf[o * per + i] = (*w)[o * per + i] * fs;
      bf[o] = static_cast<float>(((b ? double((*b)[o]) : 0.0) - (*mean)[o]) * scale + (*beta)[o]);
    }
    const std::string base = ir::ParamView(*paramOf(c.w())).var();
    const std::string wname = addF32(base + ".bn_folded", ws, wf.data(), int64_t(wf.size()));
    const std::string bname = addF32(base + ".bn_folded_bias", {k}, bf.data(), k);
    onnx::NodeProto* node = add("Conv", conv, {nameOf(c.x()), wname, bname}, {nameOf(v.y())});
    convAttrs(node, c);
    return absl::OkStatus();
  }

  // --- nodes ---------------------------------------------------------------------------
  onnx::NodeProto* add(const std::string& op, const Node& from, std::vector<std::string> in,
                       std::vector<std::string> out) {
    onnx::NodeProto* n = gp_->add_node();
    n->set_op_type(op);
    n->set_name(
        fresh(absl::StrCat(from.scope().empty() ? from.result()->name() : from.scope(), "/", op)));
    for (auto& s : in) n->add_input(std::move(s));
    for (auto& s : out) n->add_output(std::move(s));
    return n;
  }
  /// A node with a fresh output named after `from`'s result; returns that name.
  std::string addTemp(const std::string& op, const Node& from, std::vector<std::string> in) {
    std::string out = fresh(absl::StrCat(from.result()->name(), ".", op));
    add(op, from, std::move(in), {out});
    return out;
  }
  static void ints(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void intAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void floatAttr(onnx::NodeProto* n, const std::string& name, double v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(static_cast<float>(v));
  }
  /// strides and pads (the same at both ends of an axis: begin h, begin w, end h, end w).
  static void windowAttrs(onnx::NodeProto* n, ir::Hw stride, ir::Hw pad) {
    ints(n, "strides", {stride.h, stride.w});
    ints(n, "pads", {pad.h, pad.w, pad.h, pad.w});
  }
  template <typename ConvView>
  static void convAttrs(onnx::NodeProto* n, const ConvView& c) {
    const ir::Shape& ws = c.w()->type().shape;
    ints(n, "kernel_shape", {ws[2], ws[3]});
    windowAttrs(n, c.stride(), c.pad());
    if (c.groups() != 1) intAttr(n, "group", c.groups());
  }
  template <typename PoolView>
  static void poolAttrs(onnx::NodeProto* n, const PoolView& p) {
    ints(n, "kernel_shape", {p.kernel().h, p.kernel().w});
    windowAttrs(n, p.stride(), p.pad());
    if (p.ceil_mode()) intAttr(n, "ceil_mode", 1);
  }
  absl::Status unary(const std::string& op, const Node& n) {
    add(op, n, {nameOf(n.operand(0))}, {nameOf(n.result())});
    return absl::OkStatus();
  }
  /// An op the spec maps one to one (`onnx NAME SINCE..UNTIL`): operands in, result out.
  absl::Status oneToOne(const ir::OnnxOp& o, const Node& n) {
    if (kExportOpset < o.since || (o.until != 0 && kExportOpset > o.until))
      return absl::UnimplementedError(absl::StrCat(at(n), ": op ", n.opName(), " is ONNX ", o.name,
                                                   " at opsets ", o.since, " to ", o.until,
                                                   ", not the exported ", kExportOpset));
    std::vector<std::string> in;
    for (size_t i = 0; i < n.numOperands(); ++i) in.push_back(nameOf(n.operand(i)));
    add(std::string(o.name), n, in, {nameOf(n.result())});
    return absl::OkStatus();
  }
  absl::Status binary(const std::string& op, const Node& n) {
    add(op, n, {nameOf(n.operand(0)), nameOf(n.operand(1))}, {nameOf(n.result())});
    return absl::OkStatus();
  }
  /// x with its last two axes swapped.
  std::string swapLastTwo(const Node& n, const Value* x) {
    std::vector<int64_t> perm;
    const int64_t r = int64_t(x->type().shape.size());
    for (int64_t i = 0; i < r; ++i) perm.push_back(i);
    std::swap(perm[size_t(r - 2)], perm[size_t(r - 1)]);
    const std::string out = fresh(absl::StrCat(x->name(), ".T"));
    ints(add("Transpose", n, {nameOf(x)}, {out}), "perm", perm);
    return out;
  }

  /// attention as torch.onnx.export writes F.scaled_dot_product_attention at opset 17 (the
  /// Attention op is opset 23's): heads split off by Reshape and Transpose, MatMul, the
  /// scale, the causal mask added as 0 / -inf, Softmax, MatMul, the heads merged back.
  /// The log-sum-exp is the backward's, which no inference graph reads.
  absl::Status emitAttention(const Node& n) {
    const ir::AttentionView v(n);
    const int64_t heads = v.heads();
    const int64_t tq = v.q()->type().shape[1], tk = v.k()->type().shape[1];
    const int64_t d = v.q()->type().shape[2] / heads, dv = v.v()->type().shape[2] / heads;
    const std::string base = n.result()->name();
    auto split = [&](const Value* x, int64_t tokens, int64_t width, std::vector<int64_t> perm) {
      const std::string r = addTemp(
          "Reshape", n, {nameOf(x), addInts(x->name() + ".heads", {-1, tokens, heads, width})});
      const std::string t = fresh(absl::StrCat(x->name(), ".by_head"));
      ints(add("Transpose", n, {r}, {t}), "perm", perm);
      return t;
    };
    const std::string q = split(v.q(), tq, d, {0, 2, 1, 3});
    const std::string k = split(v.k(), tk, d, {0, 2, 3, 1});  // k^T
    const std::string val = split(v.v(), tk, dv, {0, 2, 1, 3});
    std::string s = addTemp("MatMul", n, {q, k});
    s = addTemp("Mul", n, {s, addScalar(base + ".scale", float(v.scale()))});
    if (v.causal()) {
      std::vector<float> mask(static_cast<size_t>(tq * tk), 0.0f);
      for (int64_t i = 0; i < tq; ++i)
        for (int64_t j = i + 1; j < tk; ++j) mask[size_t(i * tk + j)] = -INFINITY;
      s = addTemp("Add", n, {s, addF32(base + ".causal_mask", {tq, tk}, mask.data(), tq * tk)});
    }
    const std::string p = fresh(base + ".probabilities");
    intAttr(add("Softmax", n, {s}, {p}), "axis", -1);
    const std::string o = addTemp("MatMul", n, {p, val});
    const std::string merged = fresh(base + ".merged");
    ints(add("Transpose", n, {o}, {merged}), "perm", {0, 2, 1, 3});
    add("Reshape", n, {merged, addInts(base + ".shape", {-1, tq, heads * dv})}, {nameOf(v.y())});
    return absl::OkStatus();
  }

  absl::Status emit(const Node& n) {
    if (const ir::OnnxOp* o = ir::opInfo(n.op()).onnx) return oneToOne(*o, n);
    switch (n.op()) {
      case Op::kInput:
        if (!names_.contains(n.result()) || !isGraphInput(n.result()))
          return absl::InvalidArgumentError(absl::StrCat("the outputs depend on graph input %",
                                                         n.result()->name(),
                                                         ", which is not exported"));
        return absl::OkStatus();
      case Op::kParam: {
        const std::string& var = ir::ParamView(n).var();
        auto done = var_names_.find(var);
        if (done != var_names_.end()) {
          names_[n.result()] = done->second;
          return absl::OkStatus();
        }
        ASSIGN_OR_RETURN(const std::vector<float>* data, varValue(n));
        std::string name =
            addF32(var, n.result()->type().shape, data->data(), int64_t(data->size()));
        var_names_[var] = name;
        names_[n.result()] = name;
        return absl::OkStatus();
      }
      case Op::kConstant: {
        if (n.result()->type().dtype != ir::DType::kF32) break;
        if (hasBatchAxis(n.result())) return batchBaked(n);
        std::vector<float> v(size_t(n.result()->type().numElements()),
                             float(ir::ConstantView(n).value()));
        names_[n.result()] =
            addF32(n.result()->name(), n.result()->type().shape, v.data(), int64_t(v.size()));
        return absl::OkStatus();
      }
      case Op::kConv2d: {
        if (auto f = fold_into_.find(&n); f != fold_into_.end())
          return emitFoldedConv(n, *f->second);
        const ir::Conv2dView c(n);
        std::vector<std::string> in{nameOf(c.x()), nameOf(c.w())};
        if (c.b() != nullptr) in.push_back(nameOf(c.b()));
        convAttrs(add("Conv", n, std::move(in), {nameOf(c.y())}), c);
        return absl::OkStatus();
      }
      case Op::kConv2dReluAvgPool: {  // fuse-conv-relu-pool's: its three ops written out again
        const ir::Conv2dReluAvgPoolView v(n);
        std::vector<std::string> in{nameOf(v.x()), nameOf(v.w())};
        if (v.b() != nullptr) in.push_back(nameOf(v.b()));
        const std::string y = nameOf(v.y()), conv = absl::StrCat(y, ".conv"),
                          relu = absl::StrCat(y, ".relu");
        convAttrs(add("Conv", n, std::move(in), {conv}), v);
        add("Relu", n, {conv}, {relu});
        onnx::NodeProto* pool = add("AveragePool", n, {relu}, {y});
        ints(pool, "kernel_shape", {2, 2});
        windowAttrs(pool, 2, 0);
        return absl::OkStatus();
      }
      case Op::kBatchNorm: {
        const ir::BatchNormView v(n);
        if (v.training())
          return absl::InvalidArgumentError(
              absl::StrCat(at(n), ": batch norm in training mode has no inference form"));
        floatAttr(add("BatchNormalization", n,
                      {nameOf(v.x()), nameOf(v.gamma()), nameOf(v.beta()), nameOf(v.running_mean()),
                       nameOf(v.running_var())},
                      {nameOf(v.y())}),
                  "epsilon", v.eps());
        return absl::OkStatus();
      }
      case Op::kLayerNorm: {
        const ir::LayerNormView v(n);
        onnx::NodeProto* node =
            add("LayerNormalization", n, {nameOf(v.x()), nameOf(v.gamma()), nameOf(v.beta())},
                {nameOf(v.y())});
        intAttr(node, "axis", -1);
        floatAttr(node, "epsilon", v.eps());
        return absl::OkStatus();
      }
      case Op::kSoftmax:
        intAttr(add("Softmax", n, {nameOf(n.operand(0))}, {nameOf(n.result())}), "axis",
                ir::SoftmaxView(n).axis());
        return absl::OkStatus();
      case Op::kLogSoftmax:
        intAttr(add("LogSoftmax", n, {nameOf(n.operand(0))}, {nameOf(n.result())}), "axis",
                ir::LogSoftmaxView(n).axis());
        return absl::OkStatus();
      case Op::kGelu: {
        // Opset 17 has no Gelu (20 adds it): x/2 (1 + erf(x / sqrt 2)), as
        // torch.onnx.export writes nn.GELU() at this opset.
        const std::string x = nameOf(n.operand(0));
        std::string t = addTemp("Div", n, {x, addScalar(x + ".sqrt2", float(M_SQRT2))});
        t = addTemp("Erf", n, {t});
        t = addTemp("Add", n, {t, addScalar(x + ".one", 1.0f)});
        t = addTemp("Mul", n, {x, t});
        add("Mul", n, {t, addScalar(x + ".half", 0.5f)}, {nameOf(n.result())});
        return absl::OkStatus();
      }
      case Op::kGeluTanh: {
        // x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), PyTorch's approximate="tanh".
        const std::string x = nameOf(n.operand(0));
        std::string cube = addTemp("Mul", n, {addTemp("Mul", n, {x, x}), x});
        std::string t = addTemp("Mul", n, {cube, addScalar(x + ".c", 0.044715f)});
        t = addTemp("Add", n, {x, t});
        t = addTemp("Mul", n, {t, addScalar(x + ".k", float(std::sqrt(2.0 / M_PI)))});
        t = addTemp("Tanh", n, {t});
        t = addTemp("Add", n, {t, addScalar(x + ".one", 1.0f)});
        t = addTemp("Mul", n, {x, t});
        add("Mul", n, {t, addScalar(x + ".half", 0.5f)}, {nameOf(n.result())});
        return absl::OkStatus();
      }
      case Op::kRelu6: {  // Clip's bounds are inputs from opset 11 on
        const std::string x = nameOf(n.operand(0));
        add("Clip", n, {x, addScalar(x + ".zero", 0.0f), addScalar(x + ".six", 6.0f)},
            {nameOf(n.result())});
        return absl::OkStatus();
      }
      case Op::kClip: {
        const ir::ClipView v(n);
        const std::string x = nameOf(v.x());
        add("Clip", n,
            {x, addScalar(x + ".min", float(v.min())), addScalar(x + ".max", float(v.max()))},
            {nameOf(n.result())});
        return absl::OkStatus();
      }
      case Op::kPad: {  // opset 11 on: pads and the constant are inputs
        const ir::PadView v(n);
        const std::string x = nameOf(v.x());
        onnx::NodeProto* node =
            add("Pad", n,
                {x, addInts(x + ".pads", v.pads()), addScalar(x + ".value", float(v.value()))},
                {nameOf(n.result())});
        onnx::AttributeProto* a = node->add_attribute();
        a->set_name("mode");
        a->set_type(onnx::AttributeProto::STRING);
        a->set_s(std::string(ir::toWord(v.mode())));
        return absl::OkStatus();
      }
      case Op::kSilu: {  // ONNX has no SiLU: x * Sigmoid(x), as torch.onnx.export writes it
        const std::string x = nameOf(n.operand(0));
        add("Mul", n, {x, addTemp("Sigmoid", n, {x})}, {nameOf(n.result())});
        return absl::OkStatus();
      }
      case Op::kHardsigmoid: {  // nn.Hardsigmoid as torch.onnx.export writes it
        onnx::NodeProto* node = add("HardSigmoid", n, {nameOf(n.operand(0))}, {nameOf(n.result())});
        floatAttr(node, "alpha", 1.0 / 6.0);
        floatAttr(node, "beta", 0.5);
        return absl::OkStatus();
      }
      case Op::kDropout:  // the identity at inference (the builder leaves it out already)
        names_[n.result()] = nameOf(n.operand(0));
        return absl::OkStatus();
      case Op::kMaxPool2d:
        poolAttrs(add("MaxPool", n, {nameOf(n.operand(0))}, {nameOf(n.result())}),
                  ir::MaxPool2dView(n));
        return absl::OkStatus();
      case Op::kAvgPool2d: {
        const ir::AvgPool2dView v(n);
        if (v.ceil_mode() &&
            v.pad() != ir::Hw(0))  // ONNX's opsets count its partial windows otherwise
          return absl::UnimplementedError(
              absl::StrCat(at(n),
                           ": avg_pool2d with ceil_mode and padding has no ONNX AveragePool that "
                           "divides its partial windows alike"));
        std::string input = nameOf(n.operand(0));
        if (v.relu()) {  // fuse-relu-pool's: the Relu it absorbed, written out again
          const std::string relu_out = absl::StrCat(nameOf(n.result()), ".relu");
          add("Relu", n, {input}, {relu_out});
          input = relu_out;
        }
        onnx::NodeProto* node = add("AveragePool", n, {input}, {nameOf(n.result())});
        poolAttrs(node, v);
        intAttr(node, "count_include_pad", 1);  // padding counts as zeros (ops.td)
        return absl::OkStatus();
      }
      case Op::kGlobalAvgPool:
        return unary("GlobalAveragePool", n);
      case Op::kCast: {
        ASSIGN_OR_RETURN(const int32_t to, onnxType(n.result()->type().dtype));
        intAttr(add("Cast", n, {nameOf(n.operand(0))}, {nameOf(n.result())}), "to", to);
        return absl::OkStatus();
      }
      case Op::kFlatten:
        intAttr(add("Flatten", n, {nameOf(n.operand(0))}, {nameOf(n.result())}), "axis", 1);
        return absl::OkStatus();
      case Op::kLinear: {
        const ir::LinearView v(n);
        if (v.x()->type().shape.size() == 2) {  // Gemm: y = x w^T + b
          std::vector<std::string> in{nameOf(v.x()), nameOf(v.w())};
          if (v.b() != nullptr) in.push_back(nameOf(v.b()));
          intAttr(add("Gemm", n, std::move(in), {nameOf(v.y())}), "transB", 1);
          return absl::OkStatus();
        }
        // Gemm takes matrices only: a batch of rows is MatMul with w^T, then the bias.
        const std::string wt = swapLastTwo(n, v.w());
        if (v.b() == nullptr) {
          add("MatMul", n, {nameOf(v.x()), wt}, {nameOf(v.y())});
        } else {
          add("Add", n, {addTemp("MatMul", n, {nameOf(v.x()), wt}), nameOf(v.b())},
              {nameOf(v.y())});
        }
        return absl::OkStatus();
      }
      case Op::kMatmul: {
        const ir::MatmulView v(n);
        const std::string a = v.trans_a() ? swapLastTwo(n, v.a()) : nameOf(v.a());
        const std::string b = v.trans_b() ? swapLastTwo(n, v.b()) : nameOf(v.b());
        add("MatMul", n, {a, b}, {nameOf(v.c())});
        return absl::OkStatus();
      }
      case Op::kReshape:
        // The batch axis is written -1 (ops.td), so one shape serves every batch.
        if (!other_.empty() &&
            ir::ReshapeView(*other_.at(&n)).shape() != ir::ReshapeView(n).shape())
          return batchBaked(n);
        add("Reshape", n,
            {nameOf(n.operand(0)),
             addInts(n.result()->name() + ".shape", ir::ReshapeView(n).shape())},
            {nameOf(n.result())});
        return absl::OkStatus();
      case Op::kTranspose:
        ints(add("Transpose", n, {nameOf(n.operand(0))}, {nameOf(n.result())}), "perm",
             ir::TransposeView(n).perm());
        return absl::OkStatus();
      case Op::kScale:
        add("Mul", n,
            {nameOf(n.operand(0)),
             addScalar(n.result()->name() + ".factor", float(ir::ScaleView(n).factor()))},
            {nameOf(n.result())});
        return absl::OkStatus();
      case Op::kAdd:
      case Op::kAddBcast:
        return binary("Add", n);
      case Op::kMulBcast:
        return binary("Mul", n);
      case Op::kReduceSum: {
        const ir::ReduceSumView v(n);  // ReduceSum-13: the axes are an input
        intAttr(add("ReduceSum", n, {nameOf(v.x()), addInts(v.y()->name() + ".axes", {v.axis()})},
                    {nameOf(v.y())}),
                "keepdims", v.keepdim() ? 1 : 0);
        return absl::OkStatus();
      }
      case Op::kReduceMean: {
        const ir::ReduceMeanView v(n);  // ReduceMean-13 (to opset 17): an attribute
        onnx::NodeProto* node = add("ReduceMean", n, {nameOf(v.x())}, {nameOf(v.y())});
        ints(node, "axes", {v.axis()});
        intAttr(node, "keepdims", v.keepdim() ? 1 : 0);
        return absl::OkStatus();
      }
      case Op::kConcatAxis:
        return emitConcat(n);
      case Op::kSliceAxis: {
        const ir::SliceAxisView v(n);
        if (batchAxis(v.x(), size_t(v.axis() < 0 ? v.axis() + int64_t(v.x()->type().shape.size())
                                                 : v.axis())))
          return batchBaked(n);
        add("Slice", n,
            {nameOf(v.x()), addInts(v.y()->name() + ".starts", {v.start()}),
             addInts(v.y()->name() + ".ends", {v.end()}),
             addInts(v.y()->name() + ".axes", {v.axis()})},
            {nameOf(v.y())});
        return absl::OkStatus();
      }
      case Op::kAttention:
        return emitAttention(n);
      case Op::kCompare:
        return emitCompare(n);
      case Op::kWhere: {  // the condition a float, nonzero true: Cast to bool says the same
        const ir::WhereView v(n);
        std::string cond = addTemp("Cast", n, {nameOf(v.cond())});
        intAttr(lastNode(), "to", onnx::TensorProto::BOOL);
        add("Where", n, {cond, nameOf(v.a()), nameOf(v.b())}, {nameOf(v.y())});
        return absl::OkStatus();
      }
      case Op::kMod:
        return emitMod(n);
      case Op::kEmbedding: {
        const ir::EmbeddingView v(n);  // Gather takes int32 indices as they are
        intAttr(add("Gather", n, {nameOf(v.table()), nameOf(v.ids())}, {nameOf(v.y())}), "axis", 0);
        return absl::OkStatus();
      }
      default:
        break;
    }
    return absl::UnimplementedError(
        absl::StrCat(at(n), ": op ", n.opName(), " has no ONNX form in tandem export"));
  }

  onnx::NodeProto* lastNode() { return gp_->mutable_node(gp_->node_size() - 1); }

  /// The node's result as the 1 and 0 of f32 from a boolean.
  void castToFloat(const Node& n, const std::string& boolean) {
    intAttr(add("Cast", n, {boolean}, {nameOf(n.result())}), "to", onnx::TensorProto::FLOAT);
  }

  /// compare: ONNX's comparison (ne: Not of Equal), its boolean cast to the 1 and 0 of f32.
  absl::Status emitCompare(const Node& n) {
    const ir::CompareView v(n);
    const std::string a = nameOf(v.a()), b = nameOf(v.b());
    std::string r;
    switch (v.kind()) {
      case ir::Comparison::kEq:
        r = addTemp("Equal", n, {a, b});
        break;
      case ir::Comparison::kNe:
        r = addTemp("Not", n, {addTemp("Equal", n, {a, b})});
        break;
      case ir::Comparison::kLt:
        r = addTemp("Less", n, {a, b});
        break;
      case ir::Comparison::kLe:
        r = addTemp("LessOrEqual", n, {a, b});
        break;
      case ir::Comparison::kGt:
        r = addTemp("Greater", n, {a, b});
        break;
      case ir::Comparison::kGe:
        r = addTemp("GreaterOrEqual", n, {a, b});
        break;
    }
    castToFloat(n, r);
    return absl::OkStatus();
  }

  /// mod: ONNX's Mod takes floats with fmod=1 only; the remainder (the sign of b) is that
  /// plus b where the signs differ and it is not 0, the same two float steps as the kernels.
  absl::Status emitMod(const Node& n) {
    const ir::ModView v(n);
    const std::string a = nameOf(v.a()), b = nameOf(v.b());
    if (v.fmod()) {
      intAttr(add("Mod", n, {a, b}, {nameOf(v.y())}), "fmod", 1);
      return absl::OkStatus();
    }
    const std::string r = addTemp("Mod", n, {a, b});
    intAttr(lastNode(), "fmod", 1);
    const std::string zero = addScalar(v.y()->name() + ".zero", 0.0f);
    const std::string differ =
        addTemp("Xor", n, {addTemp("Less", n, {r, zero}), addTemp("Less", n, {b, zero})});
    const std::string fix =
        addTemp("And", n, {differ, addTemp("Not", n, {addTemp("Equal", n, {r, zero})})});
    add("Add", n, {r, addTemp("Where", n, {fix, b, zero})}, {nameOf(v.y())});
    return absl::OkStatus();
  }

  /// concat_axis broadcasts a size-1 axis of an operand against the others (a class token
  /// [1,1,D] beside tokens [N,T,D]); ONNX's Concat does not, so such an operand is
  /// Expanded to the result's sizes first (the batch is concrete here).
  absl::Status emitConcat(const Node& n) {
    const ir::ConcatAxisView v(n);
    const ir::Shape& ys = v.y()->type().shape;
    const int64_t rank = int64_t(ys.size());
    const int64_t axis = v.axis() < 0 ? v.axis() + rank : v.axis();
    std::vector<std::string> in;
    for (const Value* x : v.xs()) {
      const ir::Shape& xs = x->type().shape;
      ir::Shape want = ys;
      want[size_t(axis)] = xs[size_t(axis)];
      if (xs == want) {
        in.push_back(nameOf(x));
        continue;
      }
      // Expand broadcasts x against the target: 1 keeps an axis, and an axis that grows
      // with the batch takes its size from an operand that has it (Shape's start/end).
      std::vector<std::string> pieces;
      std::vector<int64_t> fixed;
      for (size_t a = 0; a < ys.size(); ++a) {
        const Value* full = nullptr;
        for (const Value* o : v.xs())
          if (xs[a] != want[a] && batchAxis(o, a)) full = o;
        if (full == nullptr) {
          fixed.push_back(xs[a] == want[a] ? 1 : want[a]);
          continue;
        }
        if (!fixed.empty()) pieces.push_back(addInts(x->name() + ".expand", fixed));
        fixed.clear();
        const std::string dim = fresh(absl::StrCat(full->name(), ".dim", a));
        onnx::NodeProto* shape = add("Shape", n, {nameOf(full)}, {dim});
        intAttr(shape, "start", int64_t(a));
        intAttr(shape, "end", int64_t(a) + 1);
        pieces.push_back(dim);
      }
      if (!fixed.empty()) pieces.push_back(addInts(x->name() + ".expand", fixed));
      std::string target = pieces[0];
      if (pieces.size() > 1) {
        target = fresh(x->name() + ".expand_shape");
        intAttr(add("Concat", n, pieces, {target}), "axis", 0);
      }
      in.push_back(addTemp("Expand", n, {nameOf(x), target}));
    }
    intAttr(add("Concat", n, std::move(in), {nameOf(v.y())}), "axis", axis);
    return absl::OkStatus();
  }

  absl::Status batchBaked(const Node& n) const {
    return absl::UnimplementedError(absl::StrCat(
        at(n), ": its attributes or values hold the batch's size; export with --batch N"));
  }

  bool isGraphInput(const Value* v) const {
    for (const onnx::ValueInfoProto& in : gp_->input())
      if (auto it = names_.find(v); it != names_.end() && it->second == in.name()) return true;
    return false;
  }

  const ir::Graph& g_;
  const VarValues& values_;
  ExportReport* report_;
  absl::flat_hash_map<const Value*, std::vector<Node*>> users_;
  onnx::GraphProto* gp_ = nullptr;
  absl::flat_hash_map<const Value*, std::string> names_;
  std::set<std::string> taken_;
  std::map<std::string, std::string> var_names_;             // variable -> its initializer
  absl::flat_hash_map<const Node*, const Node*> fold_into_;  // conv -> its batch norm
  absl::flat_hash_map<const Node*, const Node*> other_;      // the node at another batch
  absl::flat_hash_set<const Node*> skipped_;  // batch norms folded, variables they replace
};

}  // namespace

absl::StatusOr<onnx::ModelProto> exportGraph(const ir::Graph& graph,
                                             const std::vector<NamedValue>& inputs,
                                             const std::vector<NamedValue>& outputs,
                                             const VarValues& values, ExportReport* report,
                                             const ir::Graph* other_batch) {
  if (other_batch != nullptr && other_batch->nodes().size() != graph.nodes().size())
    return absl::InvalidArgumentError(absl::StrCat("@", graph.name(), " has ", graph.nodes().size(),
                                                   " nodes, built for another batch ",
                                                   other_batch->nodes().size()));
  return Exporter(graph, values, report, other_batch).run(inputs, outputs);
}

absl::StatusOr<onnx::ModelProto> exportClassifier(const ir::Module& module, const VarValues& values,
                                                  ExportReport* report,
                                                  const ir::Module* other_batch) {
  const ir::Graph* eval = module.graph(ir::kEvalGraph);
  if (eval == nullptr)
    return absl::InvalidArgumentError(
        absl::StrCat("module @", module.name(), " has no @", ir::kEvalGraph));
  if (module.isReplicated())
    return absl::InvalidArgumentError(absl::StrCat(
        "module @", module.name(), " is compiled (replicated); export takes the model as built"));
  // frontend/model.h's eval step: inputs x (images) and y (labels); its loss reads the logits.
  const Value* images = eval->findValue("x");
  const Value* logits = nullptr;
  for (const auto& n : eval->nodes())
    if (n->op() == Op::kSoftmaxCrossEntropy) logits = ir::SoftmaxCrossEntropyView(*n).logits();
  if (images == nullptr || logits == nullptr)
    return absl::InvalidArgumentError(
        absl::StrCat("module @", module.name(), ": @", ir::kEvalGraph,
                     " is not a classifier's (frontend/model.h: images %x in, a "
                     "softmax_cross_entropy on the logits)"));
  const ir::Graph* other = other_batch != nullptr ? other_batch->graph(ir::kEvalGraph) : nullptr;
  if (other_batch != nullptr && other == nullptr)
    return absl::InvalidArgumentError(
        absl::StrCat("module @", other_batch->name(), " has no @", ir::kEvalGraph));
  return exportGraph(*eval, {{images, "x"}}, {{logits, "logits"}}, values, report, other);
}

}  // namespace tandem::onnx_export

// The converter table: one entry per ONNX op Tandem imports, each saying how the op's
// uses map onto ops of ir/ops.td, and refusing (unsupported) the uses they cannot
// express, with the reason. Values known at import time (shapes, constants and the index
// arithmetic on them) are computed here on the host.

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/onnx/converter.h"
#include "frontend/onnx/patterns.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"

namespace tandem::onnx_import {
namespace {

using ir::VarRole;

constexpr ir::Initializer kZeros{ir::Initializer::Kind::kZeros};
constexpr ir::Initializer kOnes{ir::Initializer::Kind::kOnes};

template <typename Dims>
std::string shapeText(const Dims& s) {
  return absl::StrCat("[", absl::StrJoin(s, ","), "]");
}

ir::Shape toShape(const std::vector<int64_t>& v) { return ir::Shape(v.begin(), v.end()); }

template <typename Dims>
int64_t product(const Dims& s, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t n = 1;
  for (size_t i = from; i < std::min(to, s.size()); ++i) n *= s[i];
  return n;
}

absl::StatusOr<int64_t> normalizeAxis(int64_t axis, int64_t rank, absl::string_view what) {
  if (axis < -rank || axis >= rank)
    return NodeContext::invalid(
        absl::StrCat(what, " ", axis, " is outside [", -rank, ", ", rank, ")"));
  return axis < 0 ? axis + rank : axis;
}

/// Integer values of a known input (axes, shapes, starts); an error when it is not one.
absl::StatusOr<std::vector<int64_t>> knownInts(NodeContext& c, size_t i) {
  ASSIGN_OR_RETURN(const OnnxTensor* v, c.constant(i));
  if (v->isFloat())
    return NodeContext::invalid(
        absl::StrCat("input ", i, " must hold integers, not ", elemTypeName(v->elem_type)));
  return v->ints;
}

/// A known value reshaped (same elements, row-major).
OnnxTensor withShape(const OnnxTensor& v, ir::Shape shape) {
  OnnxTensor out = v;
  out.shape = std::move(shape);
  return out;
}

/// Reshapes a tensor of the graph; the batch axis written -1 when the shape keeps it, so
/// that replicate's per-device slices reshape alike (docs/DESIGN.md, shapes under replicate).
Tensor reshapeTensor(NodeContext& c, Tensor x, const ir::Shape& shape) {
  if (x.shape() == shape) return x;
  std::vector<int64_t> s(shape.begin(), shape.end());
  if (!s.empty() && !x.shape().empty() && s[0] == x.shape()[0] && s[0] > 0) s[0] = -1;
  return c.emit(ir::ReshapeArgs{.x = x.value(), .shape = std::move(s)}.spec());
}

/// x as rows and back (layer norm's [rows, inner] and its statistics): axis 0 is written
/// -1, since the rows are as many as the leading axes hold, which replicate divides.
Tensor reshapeRows(NodeContext& c, Tensor x, const ir::Shape& shape) {
  if (x.shape() == shape) return x;
  std::vector<int64_t> s(shape.begin(), shape.end());
  if (!s.empty() && s[0] > 0) s[0] = -1;
  return c.emit(ir::ReshapeArgs{.x = x.value(), .shape = std::move(s)}.spec());
}

/// The one axis of `shape` that grows in proportion to the batch, by `other` (the same
/// value's shape at another batch size); none where none or several do, or where the
/// growth is not a multiple of the batch.
std::optional<size_t> batchAxis(const ir::Shape& shape, const NodeContext::OtherBatch& other) {
  if (other.shape.size() != shape.size()) return std::nullopt;
  std::vector<size_t> grows;
  for (size_t a = 0; a < shape.size(); ++a)
    if (other.shape[a] != shape[a]) grows.push_back(a);
  if (grows.size() != 1) return std::nullopt;
  const int64_t v = shape[grows[0]];
  if (v > 0 && v % other.batch == 0 && v / other.batch * other.other_batch == other.shape[grows[0]])
    return grows[0];
  return std::nullopt;
}

/// x reshaped to `shape` as the node's output 0. Where the import knows that output's shape
/// at another batch size (NodeContext::atOtherBatch), the one dimension that grows in
/// proportion to the batch is written -1, at whatever axis it is (MultiheadAttention's
/// sequence-first [T, N*H, hd] and [T*N, D]), and none where none differs: replicate
/// infers it on each device's share. A target with two such dimensions, or one that is not
/// a multiple of the batch, stays concrete: replicate then refuses the reshape by name.
/// Without that other import, as reshapeTensor (axis 0 taken for the batch).
Tensor reshapeOutput(NodeContext& c, Tensor x, const ir::Shape& shape) {
  std::optional<NodeContext::OtherBatch> other = c.atOtherBatch(0);
  if (!other || other->shape.size() != shape.size()) return reshapeTensor(c, x, shape);
  if (x.shape() == shape) return x;
  std::optional<size_t> y_axis = batchAxis(shape, *other);
  if (std::optional<NodeContext::OtherBatch> in = c.inputAtOtherBatch(0)) {
    // x's batch not outermost: marked by a reshape that keeps x's shape, its batch axis
    // -1, from which the reshape's gradient takes where to put it (ir: gradReshape).
    std::optional<size_t> x_axis = batchAxis(x.shape(), *in);
    const ir::Node* def = x.value()->def();
    const bool marked = def != nullptr && def->op() == ir::Op::kReshape && x_axis &&
                        ir::ReshapeView(*def).shape().at(*x_axis) == -1;
    if (x_axis && *x_axis != 0 && !marked) {
      std::vector<int64_t> keep(x.shape().begin(), x.shape().end());
      keep[*x_axis] = -1;
      x = c.emit(ir::ReshapeArgs{.x = x.value(), .shape = std::move(keep)}.spec());
    }
  }
  std::vector<int64_t> s(shape.begin(), shape.end());
  if (y_axis) s[*y_axis] = -1;
  return c.emit(ir::ReshapeArgs{.x = x.value(), .shape = std::move(s)}.spec());
}

/// Input 0 in `shape` as output 0: a known value stays known, a tensor is reshaped.
absl::Status reshapeInput(NodeContext& c, const ir::Shape& shape) {
  if (c.isConstant(0)) {
    ASSIGN_OR_RETURN(const OnnxTensor* v, c.constant(0));
    c.setOutput(0, withShape(*v, shape));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
  c.setOutput(0, reshapeOutput(c, x, shape));
  return absl::OkStatus();
}

absl::Status identity(NodeContext& c) { return c.alias(0, 0); }

Tensor scaled(NodeContext& c, Tensor x, double factor) {
  if (factor == 1) return x;
  return c.emit(ir::ScaleArgs{.x = x.value(), .factor = factor}.spec());
}

absl::Status neg(NodeContext& c) {
  // Shape arithmetic (a layer norm's axis count) and values computed from constants; a
  // weight stays a graph op on its variable, which training updates.
  if (c.isConstant(0) && !c.isWeight(0)) {
    ASSIGN_OR_RETURN(const OnnxTensor* v, c.constant(0));
    OnnxTensor out = *v;
    out.name.clear();
    for (float& x : out.floats) x = -x;
    for (int64_t& i : out.ints) i = -i;
    c.setOutput(0, std::move(out));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
  c.setOutput(0, scaled(c, x, -1));
  return absl::OkStatus();
}

// --- bounded activations ---------------------------------------------------------------

/// A unary op of the spec on input 0.
absl::Status emitUnary(NodeContext& c, ir::Op op) {
  ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
  c.setOutput(0, c.emit(ir::NodeSpec{.op = op, .operands = {x.value()}}));
  return absl::OkStatus();
}

/// A Clip bound: the attribute (opset 6) or the known scalar input (opset 11 on); unset
/// when the model leaves it open.
absl::StatusOr<std::optional<double>> clipBound(NodeContext& c, const char* name, size_t input) {
  if (c.version() < 11) {
    if (!c.hasAttr(name)) return std::optional<double>();
    ASSIGN_OR_RETURN(float v, c.attrFloat(name, 0));
    return std::optional<double>(v);
  }
  if (!c.hasInput(input)) return std::optional<double>();
  if (!c.isConstant(input))
    return NodeContext::unsupported(absl::StrCat(
        "Clip's ", name, " (input ", input, ") is computed at run time; Tandem clips by bounds "
        "known at import"));
  ASSIGN_OR_RETURN(const OnnxTensor* v, c.constant(input));
  if (v->numElements() != 1)
    return NodeContext::invalid(absl::StrCat("Clip's ", name, " must be a scalar, it holds ",
                                             v->numElements(), " values"));
  return std::optional<double>(v->at(0));
}

/// Clip with bounds known at import: [0, 6] is ReLU6 (MobileNet v2), [0, open) ReLU (both
/// fusible and as fast as they come), any other the clip op, an open bound infinite.
absl::Status clip(NodeContext& c) {
  ASSIGN_OR_RETURN(std::optional<double> lo, clipBound(c, "min", 1));
  ASSIGN_OR_RETURN(std::optional<double> hi, clipBound(c, "max", 2));
  if (lo == 0.0 && hi == 6.0) return emitUnary(c, ir::Op::kRelu6);
  if (lo == 0.0 && !hi) return emitUnary(c, ir::Op::kRelu);
  ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
  constexpr double kInf = std::numeric_limits<double>::infinity();
  c.setOutput(
      0, c.emit(ir::ClipArgs{.x = x.value(), .min = lo.value_or(-kInf), .max = hi.value_or(kInf)}
                    .spec()));
  return absl::OkStatus();
}

Tensor addTensors(NodeContext& c, Tensor a, Tensor b);

/// HardSigmoid max(0, min(1, alpha x + beta)): with PyTorch's alpha 1/6 and beta 1/2 (what
/// nn.Hardsigmoid exports) hardsigmoid; any other as written, clip(alpha x + beta, 0, 1)
/// (each step rounded as ONNX's reference rounds it in float).
absl::Status hardSigmoid(NodeContext& c) {
  ASSIGN_OR_RETURN(float alpha, c.attrFloat("alpha", 0.2f));
  ASSIGN_OR_RETURN(float beta, c.attrFloat("beta", 0.5f));
  if (std::abs(alpha - 1.0f / 6.0f) <= 1e-6f && beta == 0.5f)
    return emitUnary(c, ir::Op::kHardsigmoid);
  ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
  Tensor t = scaled(c, x, alpha);
  if (beta != 0) {
    OnnxTensor b;
    b.name = c.node().output(0) + ".beta";
    b.shape = {1};
    b.floats = {beta};
    ASSIGN_OR_RETURN(Tensor bt, c.tensorOf(std::move(b)));
    t = addTensors(c, t, bt);
  }
  c.setOutput(0, c.emit(ir::ClipArgs{.x = t.value(), .min = 0.0, .max = 1.0}.spec()));
  return absl::OkStatus();
}

// --- binary arithmetic ---------------------------------------------------------------

enum class Arith { kAdd, kSub, kMul, kDiv };

Tensor reciprocalOf(NodeContext& c, Tensor x) {
  return c.emit(ir::ReciprocalArgs{.x = x.value()}.spec());
}

std::optional<ir::Shape> broadcastShapes(const ir::Shape& a, const ir::Shape& b);

int64_t broadcastIndex(const ir::Shape& s, const ir::Shape& out, int64_t i);
absl::Status checkKnownShape(const std::vector<int64_t>& shape, absl::string_view what);

/// Both operands known: the result computed here (shape arithmetic of exported graphs),
/// integers exactly (an index near INT64_MAX survives), floats in double rounded once.
/// Operands of one shape or a single element always; under any numpy broadcast only with
/// `any_shapes`. nullopt where it is not folded; an error for an integer division by zero.
absl::StatusOr<std::optional<OnnxTensor>> foldArith(Arith op, const OnnxTensor& a,
                                                    const OnnxTensor& b, bool any_shapes) {
  const bool simple = a.shape == b.shape || a.numElements() == 1 || b.numElements() == 1;
  if (!simple && !any_shapes) return std::nullopt;
  if (a.numElements() == 0 || b.numElements() == 0) return std::nullopt;  // nothing to pick from
  if (a.elem_type != b.elem_type) return std::nullopt;
  // The broadcast shape: a scalar [] and a one-element [1] give [1] (numpy's rank is the
  // larger one), whichever is the first operand.
  std::optional<ir::Shape> shape = broadcastShapes(a.shape, b.shape);
  if (!shape) return std::nullopt;
  if (!simple)  // only a broadcast makes a result larger than its operands
    RETURN_IF_ERROR(
        checkKnownShape(std::vector<int64_t>(shape->begin(), shape->end()), "a result"));
  OnnxTensor out;
  out.elem_type = a.elem_type;
  out.shape = *shape;
  auto index = [&](const OnnxTensor& t, int64_t i) {  // t's element under result element i
    if (simple) return size_t(t.numElements() == 1 ? 0 : i);
    return size_t(broadcastIndex(t.shape, out.shape, i));
  };
  for (int64_t i = 0, n = product(out.shape); i < n; ++i) {
    const size_t ia = index(a, i), ib = index(b, i);
    if (a.isFloat()) {
      double x = a.floats[ia], y = b.floats[ib];
      out.floats.push_back(float(op == Arith::kAdd   ? x + y
                                 : op == Arith::kSub ? x - y
                                 : op == Arith::kMul ? x * y
                                                     : x / y));
    } else {
      int64_t x = a.ints[ia], y = b.ints[ib];
      if (op == Arith::kDiv && y == 0) return NodeContext::invalid("an integer division by zero");
      out.ints.push_back(op == Arith::kAdd   ? x + y
                         : op == Arith::kSub ? x - y
                         : op == Arith::kMul ? x * y
                                             : x / y);  // ONNX's integer Div truncates
    }
  }
  return out;
}

/// A known float value with every element replaced by f(element), named `name`.
template <typename F>
OnnxTensor mapFloats(const OnnxTensor& v, std::string name, F f) {
  OnnxTensor out = v;
  out.name = std::move(name);
  for (float& x : out.floats) x = float(f(double(x)));
  return out;
}

/// The single value of a known float operand whose elements are all equal, or nullopt.
std::optional<double> uniform(const OnnxTensor& v) {
  if (!v.isFloat() || v.floats.empty()) return std::nullopt;
  for (float x : v.floats)
    if (x != v.floats[0]) return std::nullopt;
  return v.floats[0];
}

/// Values computed on the host are shape arithmetic and small: a shape from the model
/// (ConstantOfShape's, Expand's) is checked before anything of its size is allocated.
constexpr int64_t kMaxKnownElements = int64_t{1} << 24;

absl::Status checkKnownShape(const std::vector<int64_t>& shape, absl::string_view what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return NodeContext::invalid(absl::StrCat(what, " ", shapeText(shape), " is negative"));
    n = d == 0 ? 0 : n > kMaxKnownElements / d ? kMaxKnownElements + 1 : n * d;
  }
  if (n > kMaxKnownElements)
    return NodeContext::unsupported(absl::StrCat(what, " ", shapeText(shape), ": over ",
                                                 kMaxKnownElements,
                                                 " elements computed when the model is imported"));
  return absl::OkStatus();
}

/// numpy's broadcast of shapes a and b, or nullopt where they do not broadcast.
std::optional<ir::Shape> broadcastShapes(const ir::Shape& a, const ir::Shape& b) {
  ir::Shape out(std::max(a.size(), b.size()));
  for (size_t d = 0; d < out.size(); ++d) {
    const size_t from_end = out.size() - d;
    const int64_t x = from_end <= a.size() ? a[a.size() - from_end] : 1;
    const int64_t y = from_end <= b.size() ? b[b.size() - from_end] : 1;
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[d] = x == 1 ? y : x;
  }
  return out;
}

/// Element i of a value of shape `out` read from one of shape `s` broadcast to it.
int64_t broadcastIndex(const ir::Shape& s, const ir::Shape& out, int64_t i) {
  int64_t at = 0, stride = 1;
  for (size_t d = out.size(); d-- > 0;) {
    const int64_t coord = i % out[d];
    i /= out[d];
    const size_t off = out.size() - s.size();
    if (d < off) continue;
    const int64_t size = s[d - off];
    if (size != 1) at += coord * stride;
    stride *= size;
  }
  return at;
}

/// f over the elements of known values under numpy broadcasting (to `out` at least), as
/// element type `type`: how Equal, Where, Expand and Pow of known values are computed.
template <typename F>
absl::StatusOr<OnnxTensor> broadcastKnown(const std::vector<const OnnxTensor*>& in, ir::Shape out,
                                          int32_t type, F f) {
  for (const OnnxTensor* v : in) {
    std::optional<ir::Shape> s = broadcastShapes(out, v->shape);
    if (!s)
      return NodeContext::invalid(absl::StrCat("shapes ", shapeText(out), " and ",
                                               shapeText(v->shape), " do not broadcast"));
    out = *s;
  }
  RETURN_IF_ERROR(checkKnownShape(std::vector<int64_t>(out.begin(), out.end()), "a result"));
  OnnxTensor r;
  r.elem_type = type;
  r.shape = out;
  const bool is_float = r.isFloat();
  std::vector<double> args(in.size());
  for (int64_t i = 0, n = product(out); i < n; ++i) {
    for (size_t k = 0; k < in.size(); ++k)
      args[k] = in[k]->at(broadcastIndex(in[k]->shape, out, i));
    const double y = f(args);
    if (is_float)
      r.floats.push_back(float(y));
    else
      r.ints.push_back(int64_t(y));
  }
  return r;
}

/// x broadcast to `shape` as a tensor of the graph: times a constant of ones (exact).
Tensor expandTensor(NodeContext& c, Tensor x, const ir::Shape& shape) {
  if (x.shape() == shape) return x;
  Tensor ones = c.emit(ir::ConstantArgs{.value = 1}.spec(
      {.declared_types = {ir::TensorType{ir::DType::kF32, shape}}}));
  return c.emit(ir::MulBcastArgs{.a = x.value(), .b = ones.value()}.spec());
}

/// a + b of tensors under numpy broadcasting: add for equal shapes (the op fusion and the
/// layouts know), add_bcast otherwise.
Tensor addTensors(NodeContext& c, Tensor a, Tensor b) {
  if (a.shape() == b.shape()) return c.emit(ir::AddArgs{.a = a.value(), .b = b.value()}.spec());
  return c.emit(ir::AddBcastArgs{.a = a.value(), .b = b.value()}.spec());
}

/// Before opset 7, Add, Sub, Mul and Div broadcast only with broadcast=1, B's axes lined
/// up with A's from `axis` on (unset: B's last axis with A's last, as numpy does): B
/// reshaped with ones around, it broadcasts as numpy's rules say.
absl::StatusOr<std::optional<ir::Shape>> legacyBroadcastShape(NodeContext& c) {
  if (c.version() >= 7) return std::nullopt;
  ASSIGN_OR_RETURN(int64_t broadcast, c.attrInt("broadcast", 0));
  ASSIGN_OR_RETURN(ir::Shape a, c.shape(0));
  ASSIGN_OR_RETURN(ir::Shape b, c.shape(1));
  if (!broadcast) {
    if (a != b)
      return NodeContext::invalid(
          absl::StrCat("A ", shapeText(a), " and B ", shapeText(b), " differ without broadcast=1"));
    return std::nullopt;
  }
  if (!c.hasAttr("axis") || b.size() > a.size()) return std::nullopt;
  ASSIGN_OR_RETURN(int64_t axis_attr, c.attrInt("axis", 0));
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(axis_attr, int64_t(a.size()), "axis"));
  if (axis + int64_t(b.size()) > int64_t(a.size()))
    return NodeContext::invalid(
        absl::StrCat("B ", shapeText(b), " at axis ", axis, " overruns A ", shapeText(a)));
  ir::Shape out(a.size() - size_t(axis), 1);
  for (size_t d = 0; d < b.size(); ++d) out[d] = b[d];
  return out;
}

Converter arith(Arith op) {
  return [op](NodeContext& c) -> absl::Status {
    ASSIGN_OR_RETURN(std::optional<ir::Shape> legacy, legacyBroadcastShape(c));
    if (legacy) {  // B reshaped so that numpy's rules line it up as the old broadcast did
      ASSIGN_OR_RETURN(Tensor a, c.tensor(0));
      ASSIGN_OR_RETURN(Tensor b, c.tensor(1));
      b = reshapeTensor(c, b, *legacy);
      if (op == Arith::kDiv) b = reciprocalOf(c, b);
      if (op == Arith::kSub) b = scaled(c, b, -1);
      c.setOutput(0, op == Arith::kAdd || op == Arith::kSub
                         ? addTensors(c, a, b)
                         : c.emit(ir::MulBcastArgs{.a = a.value(), .b = b.value()}.spec()));
      return absl::OkStatus();
    }
    if (c.isConstant(0) && c.isConstant(1)) {
      ASSIGN_OR_RETURN(const OnnxTensor* a, c.constant(0));
      ASSIGN_OR_RETURN(const OnnxTensor* b, c.constant(1));
      // Under any broadcast: integers (index arithmetic) and floats computed from
      // constants (swin's window masks). A weight that broadcasts stays a graph op on its
      // variable, which training updates.
      const bool any_shapes =
          (!a->isFloat() && !b->isFloat()) || (!c.isWeight(0) && !c.isWeight(1));
      ASSIGN_OR_RETURN(std::optional<OnnxTensor> v, foldArith(op, *a, *b, any_shapes));
      if (v) {
        c.setOutput(0, std::move(*v));
        return absl::OkStatus();
      }
    }
    ASSIGN_OR_RETURN(Tensor a, c.tensor(0));
    Tensor b;
    if (c.isConstant(1) && op != Arith::kAdd) {
      // A known right operand: a - b = a + (-b) and a / b = a * (1/b) (within an ulp of
      // the quotient) with -b and 1/b computed here; a single factor is the scale op.
      ASSIGN_OR_RETURN(const OnnxTensor* known, c.constant(1));
      if (known->elem_type != onnx::TensorProto::FLOAT)
        return NodeContext::unsupported(absl::StrCat(
            "operand B is ", elemTypeName(known->elem_type), " (Tandem computes in float)"));
      OnnxTensor v =
          op == Arith::kSub
              ? mapFloats(*known, c.node().input(1) + ".neg", [](double x) { return -x; })
          : op == Arith::kDiv
              ? mapFloats(*known, c.node().input(1) + ".inv", [](double x) { return 1 / x; })
              : *known;
      std::optional<double> f = uniform(v);
      if (f && op != Arith::kSub && v.numElements() == 1 && v.shape.size() <= a.shape().size()) {
        c.setOutput(0, scaled(c, a, *f));
        return absl::OkStatus();
      }
      if (op == Arith::kMul) {
        ASSIGN_OR_RETURN(b, c.tensor(1));
      } else {
        ASSIGN_OR_RETURN(b, c.tensorOf(std::move(v)));
      }
      c.setOutput(0, op == Arith::kSub
                         ? addTensors(c, a, b)
                         : c.emit(ir::MulBcastArgs{.a = a.value(), .b = b.value()}.spec()));
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(b, c.tensor(1));
    // A divisor computed at run time: a * (1/b) as for a known one, 1/b the reciprocal op.
    if (op == Arith::kDiv) b = reciprocalOf(c, b);
    switch (op) {
      case Arith::kAdd:
        c.setOutput(0, addTensors(c, a, b));
        break;
      case Arith::kSub:
        c.setOutput(0, addTensors(c, a, scaled(c, b, -1)));
        break;
      default:
        c.setOutput(0, c.emit(ir::MulBcastArgs{.a = a.value(), .b = b.value()}.spec()));
        break;
    }
    return absl::OkStatus();
  };
}

absl::Status sum(NodeContext& c) {
  ASSIGN_OR_RETURN(Tensor acc, c.tensor(0));
  for (size_t i = 1; i < size_t(c.node().input_size()); ++i) {
    ASSIGN_OR_RETURN(Tensor x, c.tensor(i));
    acc = addTensors(c, acc, x);
  }
  c.setOutput(0, acc);
  return absl::OkStatus();
}

absl::Status power(NodeContext& c) {
  if (c.isConstant(0) && c.isConstant(1)) {
    ASSIGN_OR_RETURN(const OnnxTensor* x, c.constant(0));
    ASSIGN_OR_RETURN(const OnnxTensor* y, c.constant(1));
    ASSIGN_OR_RETURN(OnnxTensor v,
                     broadcastKnown({x, y}, {}, x->elem_type, [](const std::vector<double>& a) {
                       return std::pow(a[0], a[1]);
                     }));
    c.setOutput(0, std::move(v));
    return absl::OkStatus();
  }
  std::optional<double> e;
  if (c.isConstant(1)) {
    ASSIGN_OR_RETURN(const OnnxTensor* y, c.constant(1));
    if (y->numElements() == 1) e = y->at(0);
  }
  if (e == 1) return identity(c);
  if (e == 0.5) return emitUnary(c, ir::Op::kSqrt);
  if (e == -1) return emitUnary(c, ir::Op::kReciprocal);
  if (e != 2)
    return NodeContext::unsupported(
        "an exponent other than 2, 1, 0.5 or -1 known at import (Tandem computes x^2 as x * x, "
        "x^0.5 as sqrt(x) and x^-1 as 1/x; a layer norm written out with Pow is imported as a "
        "whole)");
  ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
  c.setOutput(0, c.emit(ir::MulBcastArgs{.a = x.value(), .b = x.value()}.spec()));
  return absl::OkStatus();
}

/// A unary op computed at import on a known input (shape arithmetic: the sqrt of a head
/// size), else op `run_time` of the spec.
Converter knownOr(double (*f)(double), ir::Op run_time) {
  return [f, run_time](NodeContext& c) -> absl::Status {
    if (!c.isConstant(0)) return emitUnary(c, run_time);
    ASSIGN_OR_RETURN(const OnnxTensor* v, c.constant(0));
    if (!v->isFloat())
      return NodeContext::invalid(absl::StrCat("input is ", elemTypeName(v->elem_type)));
    c.setOutput(0, mapFloats(*v, "", f));
    return absl::OkStatus();
  };
}

double erfOf(double x) { return std::erf(x); }
double sqrtOf(double x) { return std::sqrt(x); }

// --- linear algebra ------------------------------------------------------------------

absl::Status gemm(NodeContext& c) {
  ASSIGN_OR_RETURN(int64_t trans_a, c.attrInt("transA", 0));
  ASSIGN_OR_RETURN(int64_t trans_b, c.attrInt("transB", 0));
  ASSIGN_OR_RETURN(float alpha, c.attrFloat("alpha", 1));
  ASSIGN_OR_RETURN(float beta, c.attrFloat("beta", 1));
  ASSIGN_OR_RETURN(ir::Shape b_shape, c.shape(1));
  ASSIGN_OR_RETURN(Tensor a, c.tensor(0));
  const bool has_c = c.hasInput(2);
  std::optional<ir::Shape> c_shape;
  if (has_c) {
    ASSIGN_OR_RETURN(c_shape, c.shape(2));
  }
  // nn.Linear's export (x w^T + b, the weight known) is the linear op: the one conv and
  // linear layers train through.
  if (!trans_a && trans_b && alpha == 1 && beta == 1 && c.isConstant(1) && b_shape.size() == 2 &&
      (!has_c || (c.isConstant(2) && *c_shape == ir::Shape{b_shape[0]}))) {
    ASSIGN_OR_RETURN(Tensor w, c.tensor(1));
    Tensor bias;
    if (has_c) {
      ASSIGN_OR_RETURN(bias, c.tensor(2, VarRole::kParam, kZeros));
    }
    c.setOutput(0, c.emit(ir::LinearArgs{
                       .x = a.value(), .w = w.value(), .b = has_c ? bias.value() : nullptr}
                              .spec()));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(Tensor b, c.tensor(1));
  Tensor y =
      scaled(c,
             c.emit(ir::MatmulArgs{
                 .a = a.value(), .b = b.value(), .trans_a = trans_a != 0, .trans_b = trans_b != 0}
                        .spec()),
             alpha);
  if (has_c && beta != 0) {
    ASSIGN_OR_RETURN(Tensor bias, c.tensor(2, VarRole::kParam, kZeros));
    y = addTensors(c, y, scaled(c, bias, beta));
  }
  c.setOutput(0, y);
  return absl::OkStatus();
}

absl::Status matmul(NodeContext& c) {
  ASSIGN_OR_RETURN(ir::Shape a_shape, c.shape(0));
  ASSIGN_OR_RETURN(ir::Shape b_shape, c.shape(1));
  if (a_shape.size() < 2 || b_shape.size() < 2)
    return NodeContext::unsupported("a 1-D operand (Tandem's matmul takes matrices)");
  if (a_shape.size() > 2 && b_shape.size() > 2 &&
      !std::equal(a_shape.begin(), a_shape.end() - 2, b_shape.begin(), b_shape.end() - 2))
    return NodeContext::unsupported(
        absl::StrCat("batch axes broadcast (", shapeText(a_shape), " x ", shapeText(b_shape), ")"));
  ASSIGN_OR_RETURN(Tensor a, c.tensor(0));
  ASSIGN_OR_RETURN(Tensor b, c.tensor(1));
  c.setOutput(0, c.emit(ir::MatmulArgs{.a = a.value(), .b = b.value()}.spec()));
  return absl::OkStatus();
}

/// Einsum of two operands that is a batched matrix product: the same leading (batch)
/// letters on all three terms, and the last two of each a product's (…IK or …KI, …KJ or
/// …JK, …IJ): matmul with the transposes it says (maxvit's attention, "bhid,bhjd->bhij").
absl::Status einsum(NodeContext& c) {
  ASSIGN_OR_RETURN(std::string equation, c.attrString("equation", ""));
  std::string eq;
  for (char ch : equation)
    if (ch != ' ') eq += ch;
  const size_t comma = eq.find(','), arrow = eq.find("->");
  auto refuse = [&] {
    return NodeContext::unsupported(absl::StrCat(
        "equation '", equation,
        "' (Tandem reads an Einsum of two operands that is a batched "
        "matrix product: same leading letters, a product over one letter of the last two)"));
  };
  if (comma == std::string::npos || arrow == std::string::npos || arrow < comma ||
      eq.find('.') != std::string::npos || c.node().input_size() != 2)
    return refuse();
  const std::string a = eq.substr(0, comma), b = eq.substr(comma + 1, arrow - comma - 1),
                    y = eq.substr(arrow + 2);
  if (a.size() < 2 || a.size() != b.size() || a.size() != y.size()) return refuse();
  const size_t batch = a.size() - 2;
  if (a.compare(0, batch, y, 0, batch) != 0 || b.compare(0, batch, y, 0, batch) != 0)
    return refuse();
  const char i = y[batch], j = y[batch + 1];
  // a holds i and the summed k; b holds k and j.
  // a is [.., I, K] (or [.., K, I]: trans_a), b [.., K, J] (or [.., J, K]: trans_b).
  const bool trans_a = a[batch + 1] == i, trans_b = b[batch] == j;
  const char ka = trans_a ? a[batch] : a[batch + 1], kb = trans_b ? b[batch + 1] : b[batch];
  if ((trans_a ? a[batch + 1] : a[batch]) != i || (trans_b ? b[batch] : b[batch + 1]) != j ||
      ka != kb || ka == i || ka == j || i == j)
    return refuse();
  ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
  ASSIGN_OR_RETURN(Tensor w, c.tensor(1));
  c.setOutput(0, c.emit(ir::MatmulArgs{
                     .a = x.value(), .b = w.value(), .trans_a = trans_a, .trans_b = trans_b}
                            .spec()));
  return absl::OkStatus();
}

// --- convolution and pooling ---------------------------------------------------------

/// A window over [N,C,H,W], or over [N,C,L] run as [N,C,L,1] (one_d): its kernel, strides
/// and padding per axis, from the node's strides, pads or auto_pad; unsupported where an
/// axis is padded unevenly (SAME_UPPER of an even kernel) or dilated.
struct Window {
  ir::Hw kernel = 1, stride = 1, pad = 0;
  bool one_d = false;
};

absl::StatusOr<Window> window2d(NodeContext& c, const ir::Shape& x, const ir::Shape& kernel) {
  if (x.size() != 4 && x.size() != 3)
    return NodeContext::unsupported(
        absl::StrCat("a ", static_cast<int64_t>(x.size()) - 2,
                     "-D window (Tandem's take [N,C,H,W] inputs, and [N,C,L] ones as [N,C,L,1])"));
  const size_t axes = x.size() - 2;
  if (kernel.size() != axes)
    return NodeContext::invalid(absl::StrCat("kernel ", shapeText(kernel), " for X ", shapeText(x),
                                             " (one extent per spatial axis)"));
  const std::vector<int64_t> ones(axes, 1);
  ASSIGN_OR_RETURN(std::vector<int64_t> strides, c.attrInts("strides", ones));
  ASSIGN_OR_RETURN(std::vector<int64_t> dilations, c.attrInts("dilations", ones));
  if (strides.size() != axes || dilations.size() != axes)
    return NodeContext::invalid(absl::StrCat("strides ", shapeText(strides), " and dilations ",
                                             shapeText(dilations), " for a ", axes,
                                             "-D window (one per spatial axis)"));
  if (std::any_of(strides.begin(), strides.end(), [](int64_t s) { return s < 1; }))
    return NodeContext::invalid(absl::StrCat("strides ", shapeText(strides)));
  if (std::any_of(dilations.begin(), dilations.end(), [](int64_t d) { return d != 1; }))
    return NodeContext::unsupported(absl::StrCat("dilations ", shapeText(dilations)));
  ASSIGN_OR_RETURN(std::string auto_pad, c.attrString("auto_pad", "NOTSET"));
  std::vector<int64_t> pads;
  if (auto_pad == "NOTSET") {
    ASSIGN_OR_RETURN(pads, c.attrInts("pads", std::vector<int64_t>(2 * axes, 0)));
  } else if (auto_pad == "VALID") {
    pads.assign(2 * axes, 0);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    pads.assign(2 * axes, 0);
    for (size_t a = 0; a < axes; ++a) {
      const int64_t in = x[2 + a], out = (in + strides[a] - 1) / strides[a];
      const int64_t total = std::max<int64_t>((out - 1) * strides[a] + kernel[a] - in, 0);
      const int64_t small = total / 2, big = total - small;
      pads[a] = auto_pad == "SAME_UPPER" ? small : big;
      pads[a + axes] = auto_pad == "SAME_UPPER" ? big : small;
    }
  } else {
    return NodeContext::invalid(absl::StrCat("auto_pad '", auto_pad, "'"));
  }
  if (pads.size() != 2 * axes)
    return NodeContext::invalid(absl::StrCat("pads ", shapeText(pads),
                                             " (two per spatial axis: the begins, then the ends)"));
  for (size_t a = 0; a < axes; ++a)
    if (pads[a] != pads[a + axes])
      return NodeContext::unsupported(absl::StrCat("pads ", shapeText(pads), " (",
                                                   auto_pad == "NOTSET" ? "" : auto_pad + ": ",
                                                   "an axis padded unevenly at its two ends)"));
  if (axes == 1) return Window{{kernel[0], 1}, {strides[0], 1}, {pads[0], 0}, true};
  return Window{{kernel[0], kernel[1]}, {strides[0], strides[1]}, {pads[0], pads[1]}, false};
}

/// x [N,C,L] (or a filter [O,C,K]) as [N,C,L,1] for a 1-D window; any other tensor as it
/// is. The batch's axis is written -1 (reshapeTensor), a filter's stays as it is.
Tensor asWindowInput(NodeContext& c, const Window& w, Tensor x, bool batch = true) {
  if (!w.one_d) return x;
  const ir::Shape s = x.shape();
  if (batch) return reshapeTensor(c, x, {s[0], s[1], s[2], 1});
  return c.emit(
      ir::ReshapeArgs{.x = x.value(), .shape = std::vector<int64_t>{s[0], s[1], s[2], 1}}.spec());
}

/// A window op's [N,C,L',1] result back as [N,C,L'] for a 1-D window.
Tensor asWindowOutput(NodeContext& c, const Window& w, Tensor y) {
  if (!w.one_d) return y;
  const ir::Shape s = y.shape();
  return reshapeTensor(c, y, {s[0], s[1], s[2]});
}

absl::Status conv(NodeContext& c) {
  ASSIGN_OR_RETURN(ir::Shape x_shape, c.shape(0));
  ASSIGN_OR_RETURN(ir::Shape w_shape, c.shape(1));
  ASSIGN_OR_RETURN(int64_t group, c.attrInt("group", 1));
  if (w_shape.size() < 2) return NodeContext::invalid("W has rank < 2");
  if (group < 1 || w_shape[0] % group != 0 || x_shape.size() < 2 ||
      x_shape[1] != w_shape[1] * group)
    return NodeContext::invalid(absl::StrCat("attribute 'group' is ", group, ": W ",
                                             shapeText(w_shape), " and X ", shapeText(x_shape),
                                             " need M and C divisible by it, C = W's C * group"));
  const ir::Shape kernel(w_shape.begin() + 2, w_shape.end());
  // ONNX infers kernel_shape from W when it is left out; one given must be W's (the
  // convolution Tandem runs is W's: a kernel_shape that says otherwise is a broken file).
  if (c.hasAttr("kernel_shape")) {
    ASSIGN_OR_RETURN(std::vector<int64_t> declared, c.attrInts("kernel_shape"));
    if (ir::Shape(declared.begin(), declared.end()) != kernel)
      return NodeContext::invalid(absl::StrCat("attribute 'kernel_shape' is ", shapeText(declared),
                                               " but W's spatial shape is ", shapeText(kernel)));
  }
  ASSIGN_OR_RETURN(Window w, window2d(c, x_shape, kernel));
  const int64_t folded = c.inputPadding(0);  // a Pad of zeros before it (foldablePadding)
  w.pad = ir::Hw(w.pad.h + folded, w.pad.w + folded);
  ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
  ASSIGN_OR_RETURN(Tensor weight, c.tensor(1));
  Tensor bias;
  if (c.hasInput(2)) {
    ASSIGN_OR_RETURN(bias, c.tensor(2, VarRole::kParam, kZeros));
  }
  Tensor y = c.emit(ir::Conv2dArgs{.x = asWindowInput(c, w, x).value(),
                                   .w = asWindowInput(c, w, weight, /*batch=*/false).value(),
                                   .b = bias.valid() ? bias.value() : nullptr,
                                   .stride = w.stride,
                                   .pad = w.pad,
                                   .groups = group}
                        .spec());
  c.setOutput(0, asWindowOutput(c, w, y));
  return absl::OkStatus();
}

template <bool kMax>
absl::Status pool(NodeContext& c) {
  ASSIGN_OR_RETURN(ir::Shape x_shape, c.shape(0));
  ASSIGN_OR_RETURN(std::vector<int64_t> kernel, c.attrInts("kernel_shape"));
  ASSIGN_OR_RETURN(Window w, window2d(c, x_shape, toShape(kernel)));
  if (c.wantsOutput(1)) return NodeContext::unsupported("the Indices output");
  ASSIGN_OR_RETURN(int64_t ceil_mode, c.attrInt("ceil_mode", 0));
  // Average pooling's partial last window divides by its part inside the padded image
  // (PyTorch's count_include_pad): without padding that is ONNX's count of real pixels;
  // with padding ONNX's opsets have counted it otherwise.
  const bool padded = w.pad != ir::Hw(0);
  if (!kMax && ceil_mode && padded)
    return NodeContext::unsupported("ceil_mode 1 with padding (the partial windows' divisor)");
  if (!kMax && padded) {
    ASSIGN_OR_RETURN(int64_t include, c.attrInt("count_include_pad", 0));
    if (!include)
      return NodeContext::unsupported(
          "count_include_pad 0 with padding (Tandem's avg_pool2d counts the padding)");
  }
  // A Pad of zeros before it (foldablePadding, average pools only): its zeros are pixels
  // of the input, counted whatever count_include_pad says, as avg_pool2d counts padding.
  if (const int64_t folded = c.inputPadding(0); folded > 0) {
    if (ceil_mode)
      return NodeContext::unsupported("ceil_mode 1 after a Pad (the partial windows' divisor)");
    w.pad = ir::Hw(w.pad.h + folded, w.pad.w + folded);
  }
  if (2 * w.pad.h > w.kernel.h || 2 * w.pad.w > w.kernel.w)
    return NodeContext::unsupported(absl::StrCat("padding ", ir::toString(w.pad.toAttr()),
                                                 " over half the kernel ",
                                                 ir::toString(w.kernel.toAttr())));
  ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
  ir::Value* in = asWindowInput(c, w, x).value();
  Tensor y = kMax ? c.emit(ir::MaxPool2dArgs{.x = in,
                                             .kernel = w.kernel,
                                             .stride = w.stride,
                                             .pad = w.pad,
                                             .ceil_mode = ceil_mode != 0}
                               .spec())
                  : c.emit(ir::AvgPool2dArgs{.x = in,
                                             .kernel = w.kernel,
                                             .stride = w.stride,
                                             .pad = w.pad,
                                             .ceil_mode = ceil_mode != 0}
                               .spec());
  c.setOutput(0, asWindowOutput(c, w, y));
  return absl::OkStatus();
}

/// x of rank >= 3 as [N, C, rest..., 1] of rank 4, for the per-channel ops that take
/// [N,C,H,W]: an [N,C,L] batch as [N,C,L,1], [N,C,D,H,W] as [N,C,D*H,W].
ir::Shape asRank4(const ir::Shape& s) {
  if (s.size() == 3) return {s[0], s[1], s[2], 1};
  return {s[0], s[1], product(s, 2, s.size() - 1), s.back()};
}

absl::Status globalAveragePool(NodeContext& c) {
  ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
  const ir::Shape shape = x.shape();
  if (shape.size() < 3) return NodeContext::invalid("X has rank < 3");
  ir::Shape out(shape.size(), 1);
  out[0] = shape[0];
  out[1] = shape[1];
  Tensor y = c.emit(ir::GlobalAvgPoolArgs{.x = reshapeTensor(c, x, asRank4(shape)).value()}.spec());
  c.setOutput(0, reshapeTensor(c, y, out));
  return absl::OkStatus();
}

// --- normalization -------------------------------------------------------------------

absl::Status batchNormalization(NodeContext& c) {
  ASSIGN_OR_RETURN(int64_t is_test, c.attrInt("is_test", 0));
  if (c.version() < 7 && !is_test && !c.builder().training())
    return NodeContext::unsupported("is_test 0 (batch statistics) in an inference graph");
  ASSIGN_OR_RETURN(int64_t spatial, c.attrInt("spatial", 1));
  if (!spatial) return NodeContext::unsupported("spatial 0 (statistics per element)");
  ASSIGN_OR_RETURN(int64_t training_mode, c.attrInt("training_mode", 0));
  for (size_t k = 1; k < c.numOutputs(); ++k)
    if (c.wantsOutput(k))
      return NodeContext::unsupported("the running or saved statistics as outputs (training mode)");
  Builder& b = c.builder();
  if (training_mode && !b.training())
    return NodeContext::unsupported("training_mode 1 (batch statistics) in an inference graph");
  ASSIGN_OR_RETURN(float eps, c.attrFloat("epsilon", 1e-5f));
  ASSIGN_OR_RETURN(float momentum, c.attrFloat("momentum", 0.9f));
  ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
  ASSIGN_OR_RETURN(Tensor gamma, c.tensor(1, VarRole::kParam, kOnes));
  ASSIGN_OR_RETURN(Tensor beta, c.tensor(2, VarRole::kParam, kZeros));
  ASSIGN_OR_RETURN(Tensor mean, c.tensor(3, VarRole::kBuffer, kZeros));
  ASSIGN_OR_RETURN(Tensor var, c.tensor(4, VarRole::kBuffer, kOnes));
  const ir::Shape shape = x.shape();
  if (shape.size() < 2) return NodeContext::invalid("X has rank < 2");
  Tensor in = shape.size() == 2 || shape.size() == 4 ? x : reshapeTensor(c, x, asRank4(shape));
  // ONNX's momentum weighs the running statistic, Tandem's (PyTorch's) the batch's.
  Tensor y = c.emit(ir::BatchNormArgs{.x = in.value(),
                                      .gamma = gamma.value(),
                                      .beta = beta.value(),
                                      .running_mean = mean.value(),
                                      .running_var = var.value(),
                                      .training = b.training(),
                                      .momentum = 1.0 - double(momentum),
                                      .eps = double(eps)}
                        .spec());
  c.setOutput(0, reshapeTensor(c, y, shape));
  return absl::OkStatus();
}

/// layer_norm of x over its axes from `axis` on, as rows of their product's elements;
/// gamma and beta (each of those axes' shape, or [inner]) default to ones and zeros. The
/// result is the op's [rows, inner] y; its results 1 and 2 are each row's mean and variance.
Tensor layerNormRows(NodeContext& c, Tensor x, int64_t axis, float eps, Tensor gamma, Tensor beta) {
  const ir::Shape shape = x.shape();
  const int64_t outer = product(shape, 0, size_t(axis)), inner = product(shape, size_t(axis));
  auto filled = [&](double value) {
    return c.emit(ir::ConstantArgs{.value = value}.spec(
        {.declared_types = {ir::TensorType{ir::DType::kF32, {inner}}}}));
  };
  if (!gamma.valid()) gamma = filled(1);
  if (!beta.valid()) beta = filled(0);
  return c.emit(ir::LayerNormArgs{.x = reshapeRows(c, x, {outer, inner}).value(),
                                  .gamma = reshapeTensor(c, gamma, {inner}).value(),
                                  .beta = reshapeTensor(c, beta, {inner}).value(),
                                  .eps = double(eps)}
                    .spec());
}

absl::Status layerNormalization(NodeContext& c) {
  ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
  const ir::Shape shape = x.shape();
  ASSIGN_OR_RETURN(int64_t axis_attr, c.attrInt("axis", -1));
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(axis_attr, int64_t(shape.size()), "axis"));
  ASSIGN_OR_RETURN(float eps, c.attrFloat("epsilon", 1e-5f));
  ASSIGN_OR_RETURN(Tensor gamma, c.tensor(1, VarRole::kParam, kOnes));
  Tensor beta;
  if (c.hasInput(2)) {
    ASSIGN_OR_RETURN(beta, c.tensor(2, VarRole::kParam, kZeros));
  }
  Tensor y = layerNormRows(c, x, axis, eps, gamma, beta);
  c.setOutput(0, reshapeRows(c, y, shape));
  ir::Shape stat_shape = shape;
  for (size_t d = size_t(axis); d < stat_shape.size(); ++d) stat_shape[d] = 1;
  if (c.wantsOutput(1)) {
    Tensor mean(y.value()->def()->result(1));
    c.setOutput(1, reshapeRows(c, mean, stat_shape));
  }
  if (c.wantsOutput(2)) {
    // InvStdDev, 1 / sqrt(var + eps) per row: Tandem has no rsqrt op, but batch_norm at
    // inference computes gamma (x - mean) / sqrt(var + eps) + beta per channel, which with
    // a channel per row, x = 1, mean = 0, gamma = 1, beta = 0 and the row's variance
    // (layer_norm's result 2) as the running variance is exactly it.
    const int64_t rows = product(shape, 0, size_t(axis));
    auto filled = [&](double value, ir::Shape s) {
      return c.emit(ir::ConstantArgs{.value = value}.spec(
          {.declared_types = {ir::TensorType{ir::DType::kF32, std::move(s)}}}));
    };
    Tensor ones = filled(1, {rows}), zeros = filled(0, {rows});
    Tensor inv = c.emit(ir::BatchNormArgs{.x = filled(1, {1, rows}).value(),
                                          .gamma = ones.value(),
                                          .beta = zeros.value(),
                                          .running_mean = zeros.value(),
                                          .running_var = y.value()->def()->result(2),
                                          .training = false,
                                          .momentum = 0.1,
                                          .eps = double(eps)}
                            .spec());
    c.setOutput(2, reshapeRows(c, inv, stat_shape));
  }
  return absl::OkStatus();
}

// --- patterns converted whole (patterns.h) ------------------------------------------------

absl::Status fusedGelu(NodeContext& c) {
  ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
  c.setOutput(0, c.emit(ir::GeluArgs{.x = x.value()}.spec()));
  return absl::OkStatus();
}

/// Whether a weight of shape `w` is one per element of the normalized axes `row` (leading
/// ones aside), so that layer_norm's gamma or beta can be it.
bool fitsRow(const ir::Shape& w, const ir::Shape& row) {
  auto strip = [](const ir::Shape& s) {
    size_t k = 0;
    while (k + 1 < s.size() && s[k] == 1) ++k;
    return ir::Shape(s.begin() + int64_t(k), s.end());
  };
  return strip(w) == strip(row);
}

/// The layer norm written out: x, gamma (or none), beta (or none), ReduceMean's axes and
/// the epsilon added to the variance.
absl::Status fusedLayerNorm(NodeContext& c) {
  ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
  const ir::Shape shape = x.shape();
  const int64_t rank = int64_t(shape.size());
  ASSIGN_OR_RETURN(std::vector<int64_t> axes, c.attrInts("axes"));
  ASSIGN_OR_RETURN(float eps, c.attrFloat("epsilon", 1e-5f));
  for (int64_t& a : axes) {
    ASSIGN_OR_RETURN(a, normalizeAxis(a, rank, "axis"));
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  const int64_t axis = rank - int64_t(axes.size());
  for (size_t k = 0; k < axes.size(); ++k)
    if (axes[k] != axis + int64_t(k))
      return NodeContext::unsupported(absl::StrCat(
          "a layer norm written out (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div) over axes ",
          shapeText(axes), " of a ", shapeText(shape),
          " input: Tandem's layer_norm normalizes the last axes"));
  const ir::Shape row(shape.begin() + axis, shape.end());
  // gamma and beta become layer_norm's where they are one per element of a row (nn.LayerNorm's
  // weight and bias); otherwise they are applied after it as the graph says.
  bool inside = true;
  for (size_t i = 1; i < 3; ++i)
    if (c.hasInput(i)) {
      ASSIGN_OR_RETURN(ir::Shape s, c.shape(i));
      inside = inside && fitsRow(s, row);
    }
  Tensor gamma, beta;
  if (c.hasInput(1)) {
    ASSIGN_OR_RETURN(gamma, c.tensor(1, VarRole::kParam, kOnes));
  }
  if (c.hasInput(2)) {
    ASSIGN_OR_RETURN(beta, c.tensor(2, VarRole::kParam, kZeros));
  }
  Tensor y = reshapeRows(
      c, layerNormRows(c, x, axis, eps, inside ? gamma : Tensor(), inside ? beta : Tensor()),
      shape);
  if (!inside && gamma.valid())
    y = c.emit(ir::MulBcastArgs{.a = y.value(), .b = gamma.value()}.spec());
  if (!inside && beta.valid()) y = addTensors(c, y, beta);
  c.setOutput(0, y);
  return absl::OkStatus();
}

template <typename Args>
absl::Status softmaxLike(NodeContext& c) {
  ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
  const ir::Shape shape = x.shape();
  const int64_t rank = int64_t(shape.size());
  ASSIGN_OR_RETURN(int64_t axis_attr, c.attrInt("axis", c.version() >= 13 ? -1 : 1));
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(axis_attr, rank, "axis"));
  if (c.version() >= 13 || axis == rank - 1) {
    c.setOutput(0, c.emit(Args{.x = x.value(), .axis = axis}.spec()));
    return absl::OkStatus();
  }
  // Before opset 13 the input is taken as a matrix [outer, inner] split at `axis`, and
  // every row normalized.
  Tensor rows =
      reshapeTensor(c, x, {product(shape, 0, size_t(axis)), product(shape, size_t(axis))});
  Tensor y = c.emit(Args{.x = rows.value(), .axis = 1}.spec());
  c.setOutput(0, reshapeTensor(c, y, shape));
  return absl::OkStatus();
}

// --- shapes ----------------------------------------------------------------------------

absl::Status flatten(NodeContext& c) {
  ASSIGN_OR_RETURN(ir::Shape shape, c.shape(0));
  const int64_t rank = int64_t(shape.size());
  ASSIGN_OR_RETURN(int64_t axis, c.attrInt("axis", 1));
  if (axis < -rank || axis > rank)
    return NodeContext::invalid(
        absl::StrCat("axis ", axis, " is outside [", -rank, ", ", rank, "]"));
  if (axis < 0) axis += rank;
  const ir::Shape out{product(shape, 0, size_t(axis)), product(shape, size_t(axis))};
  if (axis == 1 && rank >= 2 && !c.isConstant(0)) {
    ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
    c.setOutput(0, c.emit(ir::FlattenArgs{.x = x.value()}.spec()));
    return absl::OkStatus();
  }
  return reshapeInput(c, out);
}

absl::Status reshape(NodeContext& c) {
  ASSIGN_OR_RETURN(ir::Shape in, c.shape(0));
  ASSIGN_OR_RETURN(std::vector<int64_t> want, knownInts(c, 1));
  ASSIGN_OR_RETURN(int64_t allowzero, c.attrInt("allowzero", 0));
  ir::Shape out;
  int64_t infer = -1, known = 1;
  for (size_t d = 0; d < want.size(); ++d) {
    int64_t v = want[d];
    if (v == 0 && !allowzero) {
      if (d >= in.size())
        return NodeContext::invalid(absl::StrCat("shape copies axis ", d, " the input lacks"));
      v = in[d];
    }
    if (v == -1) {
      if (infer >= 0) return NodeContext::invalid("shape has two -1 entries");
      infer = int64_t(d);
    } else if (v < 0) {
      return NodeContext::invalid(absl::StrCat("shape has a negative size ", v));
    } else {
      known *= v;
    }
    out.push_back(v);
  }
  const int64_t total = product(in);
  if (infer >= 0) {
    if (known == 0 || total % known != 0)
      return NodeContext::invalid(
          absl::StrCat("shape ", shapeText(want), " does not fit ", shapeText(in)));
    out[size_t(infer)] = total / known;
  }
  if (product(out) != total)
    return NodeContext::invalid(
        absl::StrCat("shape ", shapeText(out), " does not fit ", shapeText(in)));
  if (total == 0) return NodeContext::unsupported("an empty result (Tandem has no empty tensors)");
  return reshapeInput(c, out);
}

/// The axes of Unsqueeze and Squeeze: an attribute before opset 13, an input since.
absl::StatusOr<std::optional<std::vector<int64_t>>> axesOf(NodeContext& c, size_t input) {
  if (c.version() >= 13) {
    if (!c.hasInput(input)) return std::nullopt;
    ASSIGN_OR_RETURN(std::vector<int64_t> axes, knownInts(c, input));
    return axes;
  }
  if (!c.hasAttr("axes")) return std::nullopt;
  ASSIGN_OR_RETURN(std::vector<int64_t> axes, c.attrInts("axes"));
  return axes;
}

absl::Status unsqueeze(NodeContext& c) {
  ASSIGN_OR_RETURN(ir::Shape in, c.shape(0));
  ASSIGN_OR_RETURN(auto axes, axesOf(c, 1));
  if (!axes) return NodeContext::invalid("axes missing");
  const int64_t rank = int64_t(in.size() + axes->size());
  std::vector<bool> inserted(size_t(rank), false);
  for (int64_t a : *axes) {
    ASSIGN_OR_RETURN(int64_t n, normalizeAxis(a, rank, "axis"));
    if (inserted[size_t(n)])
      return NodeContext::invalid(absl::StrCat("axis ", a, " is given twice"));
    inserted[size_t(n)] = true;
  }
  ir::Shape out;
  size_t next = 0;
  for (int64_t d = 0; d < rank; ++d) out.push_back(inserted[size_t(d)] ? 1 : in[next++]);
  return reshapeInput(c, out);
}

absl::Status squeeze(NodeContext& c) {
  ASSIGN_OR_RETURN(ir::Shape in, c.shape(0));
  ASSIGN_OR_RETURN(auto axes, axesOf(c, 1));
  std::vector<bool> drop(in.size(), false);
  if (!axes) {
    for (size_t d = 0; d < in.size(); ++d) drop[d] = in[d] == 1;
  } else {
    for (int64_t a : *axes) {
      ASSIGN_OR_RETURN(int64_t n, normalizeAxis(a, int64_t(in.size()), "axis"));
      if (in[size_t(n)] != 1)
        return NodeContext::invalid(
            absl::StrCat("axis ", a, " has size ", in[size_t(n)], ", not 1"));
      drop[size_t(n)] = true;
    }
  }
  ir::Shape out;
  for (size_t d = 0; d < in.size(); ++d)
    if (!drop[d]) out.push_back(in[d]);
  return reshapeInput(c, out);
}

/// A known value of shape `shape` whose element at each row-major position `index` (one
/// coordinate per axis) is v's element from(index): the gathers that Transpose and Slice
/// of known values are.
template <typename From>
OnnxTensor gatherKnown(const OnnxTensor& v, ir::Shape shape, From from) {
  OnnxTensor out;
  out.elem_type = v.elem_type;
  out.shape = std::move(shape);
  std::vector<int64_t> index(out.shape.size(), 0);
  for (int64_t e = 0, n = product(out.shape); e < n; ++e) {
    const size_t at = size_t(from(index));
    if (v.isFloat())
      out.floats.push_back(v.floats[at]);
    else
      out.ints.push_back(v.ints[at]);
    for (size_t a = index.size(); a-- > 0;) {  // the next row-major position
      if (++index[a] < out.shape[a]) break;
      index[a] = 0;
    }
  }
  return out;
}

/// A known value transposed by `perm`, which the caller checked is a permutation of v's
/// axes (PyTorch's ZeroPad2d computes its pads so; swin's window masks are permuted).
OnnxTensor transposeKnown(const OnnxTensor& v, const std::vector<int64_t>& perm) {
  const size_t rank = v.shape.size();
  std::vector<int64_t> stride(rank, 1);  // of v, row-major
  for (size_t a = rank; a-- > 1;) stride[a - 1] = stride[a] * v.shape[a];
  ir::Shape shape(rank);
  for (size_t a = 0; a < rank; ++a) shape[a] = v.shape[size_t(perm[a])];
  return gatherKnown(v, std::move(shape), [&](const std::vector<int64_t>& index) {
    int64_t from = 0;
    for (size_t a = 0; a < rank; ++a) from += index[a] * stride[size_t(perm[a])];
    return from;
  });
}

absl::Status transpose(NodeContext& c) {
  ASSIGN_OR_RETURN(ir::Shape shape, c.shape(0));
  const int64_t rank = int64_t(shape.size());
  std::vector<int64_t> reversed(static_cast<size_t>(rank));
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  ASSIGN_OR_RETURN(std::vector<int64_t> perm, c.attrInts("perm", reversed));
  if (c.isConstant(0)) {
    ASSIGN_OR_RETURN(const OnnxTensor* v, c.constant(0));
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    // Integers never run as tensors, and values computed from constants are buffers:
    // computed here. A weight stays a transpose of its variable, trained as such.
    if ((!v->isFloat() || !c.isWeight(0)) &&
        sorted == std::vector<int64_t>(reversed.rbegin(), reversed.rend())) {
      c.setOutput(0, transposeKnown(*v, perm));
      return absl::OkStatus();
    }
  }
  ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
  c.setOutput(0, c.emit(ir::TransposeArgs{.x = x.value(), .perm = perm}.spec()));
  return absl::OkStatus();
}

/// Known values of one type joined along `axis` (ONNX's Concat: the other axes equal).
absl::StatusOr<OnnxTensor> concatKnown(const std::vector<const OnnxTensor*>& vs, int64_t axis) {
  OnnxTensor out = *vs[0];
  out.name.clear();
  out.floats.clear();
  out.ints.clear();
  if (out.shape.empty()) out.shape = {1};  // a scalar joins as one element
  out.shape[size_t(axis)] = 0;
  int64_t outer = 1;  // elements before the axis
  for (int64_t a = 0; a < axis; ++a) outer *= out.shape[size_t(a)];
  std::vector<int64_t> chunk;  // elements per outer index, of each input
  for (const OnnxTensor* v : vs) {
    ir::Shape s = v->shape.empty() ? ir::Shape{1} : v->shape;
    if (s.size() != out.shape.size()) return NodeContext::invalid("inputs of different ranks");
    for (size_t a = 0; a < s.size(); ++a)
      if (int64_t(a) != axis && s[a] != out.shape[a])
        return NodeContext::invalid(absl::StrCat("inputs of shapes ", shapeText(s), " and ",
                                                 shapeText(vs[0]->shape), " off the axis"));
    out.shape[size_t(axis)] += s[size_t(axis)];
    chunk.push_back(outer > 0 ? v->numElements() / outer : 0);
  }
  for (int64_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < vs.size(); ++i) {
      const int64_t from = o * chunk[i];
      if (vs[i]->isFloat())
        out.floats.insert(out.floats.end(), vs[i]->floats.begin() + from,
                          vs[i]->floats.begin() + from + chunk[i]);
      else
        out.ints.insert(out.ints.end(), vs[i]->ints.begin() + from,
                        vs[i]->ints.begin() + from + chunk[i]);
    }
  return out;
}

absl::Status concat(NodeContext& c) {
  ASSIGN_OR_RETURN(ir::Shape first, c.shape(0));
  ASSIGN_OR_RETURN(int64_t axis_attr, c.attrInt("axis", 0));
  if (!c.hasAttr("axis")) return NodeContext::invalid("attribute 'axis' is missing");
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(axis_attr, int64_t(first.size()), "axis"));
  const size_t n = size_t(c.node().input_size());
  bool all_known = true;
  for (size_t i = 0; i < n && all_known; ++i) all_known = c.isConstant(i);
  if (all_known) {
    ASSIGN_OR_RETURN(const OnnxTensor* v0, c.constant(0));
    // Shape arithmetic (1-D values), integers and values computed from constants (index
    // masks) are joined here; weights of higher rank stay graph ops on their variables.
    bool weights = false;
    for (size_t i = 0; i < n; ++i) weights = weights || c.isWeight(i);
    if (first.size() == 1 || !v0->isFloat() || !weights) {
      std::vector<const OnnxTensor*> vs;
      for (size_t i = 0; i < n; ++i) {
        ASSIGN_OR_RETURN(const OnnxTensor* v, c.constant(i));
        if (v->elem_type != v0->elem_type) return NodeContext::invalid("inputs of different types");
        vs.push_back(v);
      }
      ASSIGN_OR_RETURN(OnnxTensor out, concatKnown(vs, axis));
      c.setOutput(0, std::move(out));
      return absl::OkStatus();
    }
  }
  std::vector<Tensor> ts;
  std::vector<ir::Shape> shapes;
  for (size_t i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(Tensor x, c.tensor(i));
    ASSIGN_OR_RETURN(ir::Shape s, c.shape(i));
    ts.push_back(x);
    shapes.push_back(std::move(s));
  }
  // An operand an Expand left unexpanded (its tensor smaller than its shape) is repeated
  // by concat_axis along an axis where another operand has the full size; where none
  // has, it is expanded here.
  std::vector<ir::Value*> xs;
  for (size_t i = 0; i < n; ++i) {
    bool repeats = ts[i].shape().size() == shapes[i].size();
    for (size_t a = 0; repeats && a < shapes[i].size(); ++a) {
      if (int64_t(a) == axis || ts[i].shape()[a] == shapes[i][a]) continue;
      bool other_full = false;
      for (size_t j = 0; j < n; ++j)
        other_full = other_full || (ts[j].shape().size() > a && ts[j].shape()[a] == shapes[i][a]);
      repeats = other_full && ts[i].shape()[a] == 1;
    }
    xs.push_back(repeats ? ts[i].value() : expandTensor(c, ts[i], shapes[i]).value());
  }
  if (xs.size() == 1) {
    c.setOutput(0, Tensor(xs[0]));
    return absl::OkStatus();
  }
  c.setOutput(0, c.emit(ir::ConcatAxisArgs{.xs = std::move(xs), .axis = axis}.spec()));
  return absl::OkStatus();
}

/// ONNX's Slice of a known value: per sliced axis the indices start, start + step, ...
/// short of end (a negative step counts down: start clamped to [0, dim - 1], end to
/// [-1, dim - 1]), every index of the other axes; the elements in row-major order. An
/// empty result is a known value too (a mask's slice of width 0), which only known
/// values read.
absl::StatusOr<OnnxTensor> sliceKnown(const OnnxTensor& v, const std::vector<int64_t>& starts,
                                      const std::vector<int64_t>& ends,
                                      const std::vector<int64_t>& axes,
                                      const std::vector<int64_t>& steps) {
  const int64_t rank = int64_t(v.shape.size());
  std::vector<std::vector<int64_t>> picks(v.shape.size());
  for (size_t a = 0; a < v.shape.size(); ++a) {
    picks[a].resize(size_t(v.shape[a]));
    std::iota(picks[a].begin(), picks[a].end(), 0);
  }
  for (size_t i = 0; i < starts.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(axes[i], rank, "axis"));
    const int64_t dim = v.shape[size_t(axis)], step = steps[i];
    if (step == 0) return NodeContext::invalid("step 0");
    auto wrap = [dim](int64_t x) { return x < 0 ? x + dim : x; };
    std::vector<int64_t>& at = picks[size_t(axis)];
    at.clear();
    if (step > 0) {
      const int64_t end = std::clamp(wrap(ends[i]), int64_t{0}, dim);
      for (int64_t k = std::clamp(wrap(starts[i]), int64_t{0}, dim); k < end; k += step)
        at.push_back(k);
    } else {
      const int64_t end = std::clamp(wrap(ends[i]), int64_t{-1}, dim - 1);
      for (int64_t k = std::clamp(wrap(starts[i]), int64_t{0}, dim - 1); k > end; k += step)
        at.push_back(k);
    }
  }
  ir::Shape shape(picks.size());
  for (size_t a = 0; a < picks.size(); ++a) shape[a] = int64_t(picks[a].size());
  return gatherKnown(v, std::move(shape), [&](const std::vector<int64_t>& index) {
    int64_t from = 0;
    for (size_t a = 0; a < picks.size(); ++a) from = from * v.shape[a] + picks[a][size_t(index[a])];
    return from;
  });
}

absl::Status slice(NodeContext& c) {
  ASSIGN_OR_RETURN(ir::Shape shape, c.shape(0));
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.version() >= 10) {
    ASSIGN_OR_RETURN(starts, knownInts(c, 1));
    ASSIGN_OR_RETURN(ends, knownInts(c, 2));
    if (c.hasInput(3)) {
      ASSIGN_OR_RETURN(axes, knownInts(c, 3));
    }
    if (c.hasInput(4)) {
      ASSIGN_OR_RETURN(steps, knownInts(c, 4));
    }
  } else {
    ASSIGN_OR_RETURN(starts, c.attrInts("starts"));
    ASSIGN_OR_RETURN(ends, c.attrInts("ends"));
    ASSIGN_OR_RETURN(axes, c.attrInts("axes"));
  }
  if (axes.empty()) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return NodeContext::invalid("starts, ends, axes and steps differ in length");
  if (c.isConstant(0)) {  // shape arithmetic, masks: computed here, any step
    ASSIGN_OR_RETURN(const OnnxTensor* v, c.constant(0));
    ASSIGN_OR_RETURN(OnnxTensor out, sliceKnown(*v, starts, ends, axes, steps));
    c.setOutput(0, std::move(out));
    return absl::OkStatus();
  }
  struct Cut {
    int64_t axis, start, end;
    int64_t step = 1;  // > 1: every step-th element from start to the axis' end
  };
  std::vector<Cut> cuts;
  for (size_t i = 0; i < starts.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(axes[i], int64_t(shape.size()), "axis"));
    const int64_t dim = shape[size_t(axis)], step = steps[i];
    auto clamp = [dim](int64_t v) { return std::clamp(v < 0 ? v + dim : v, int64_t{0}, dim); };
    const int64_t start = clamp(starts[i]), end = clamp(ends[i]);
    // Every step-th element to the end of an axis the step divides (swin's patch merging,
    // x[:, 0::2, 1::2]): the axis seen as [dim / step, step], one column of it.
    if (step > 1 && start < step && end == dim && dim % step == 0) {
      cuts.push_back({axis, start, start + 1, step});
      continue;
    }
    if (step != 1)
      return NodeContext::unsupported(
          absl::StrCat("step ", step,
                       " (slice_axis takes every element; a step that divides the axis, "
                       "from a start below it to the end, is read as a reshape)"));
    if (start >= end)
      return NodeContext::unsupported("an empty result (Tandem has no empty tensors)");
    if (start > 0 || end < dim) cuts.push_back({axis, start, end});
  }
  ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
  for (const Cut& cut : cuts) {
    if (cut.step == 1) {
      x = c.emit(
          ir::SliceAxisArgs{.x = x.value(), .axis = cut.axis, .start = cut.start, .end = cut.end}
              .spec());
      continue;
    }
    ir::Shape split = x.shape(), merged = x.shape();
    const size_t a = size_t(cut.axis);
    split[a] /= cut.step;
    merged[a] /= cut.step;
    split.insert(split.begin() + int64_t(a) + 1, cut.step);
    x = reshapeTensor(c, x, split);
    x = c.emit(
        ir::SliceAxisArgs{.x = x.value(), .axis = cut.axis + 1, .start = cut.start, .end = cut.end}
            .spec());
    x = reshapeTensor(c, x, merged);
  }
  c.setOutput(0, x);
  return absl::OkStatus();
}

/// The reductions read as reduce_sum or reduce_mean over each axis, with the elementwise
/// ops before and after them that make the others: L1 sum(|x|), L2 sqrt(sum(x^2)),
/// SumSquare sum(x^2), LogSum log(sum(x)).
enum class Reduce { kSum, kMean, kSumSquare, kL1, kL2, kLogSum };

template <Reduce kKind>
absl::Status reduce(NodeContext& c) {
  ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
  const int64_t rank = int64_t(x.shape().size());
  ASSIGN_OR_RETURN(int64_t keepdims, c.attrInt("keepdims", 1));
  ASSIGN_OR_RETURN(int64_t noop, c.attrInt("noop_with_empty_axes", 0));
  std::vector<int64_t> axes;
  // ReduceSum-13 takes the axes as an input, the others from opset 18 on.
  const bool axes_input = c.version() >= (kKind == Reduce::kSum ? 13 : 18);
  if (axes_input && c.hasInput(1)) {
    ASSIGN_OR_RETURN(axes, knownInts(c, 1));
  } else if (!axes_input) {
    ASSIGN_OR_RETURN(axes, c.attrInts("axes"));
  }
  if (axes.empty() && !noop) {  // all of them; with noop_with_empty_axes none
    axes.resize(size_t(rank));
    std::iota(axes.begin(), axes.end(), 0);
  }
  for (int64_t& a : axes) {
    ASSIGN_OR_RETURN(a, normalizeAxis(a, rank, "axis"));
  }
  if (kKind == Reduce::kSumSquare || kKind == Reduce::kL2)
    x = c.emit(ir::MulBcastArgs{.a = x.value(), .b = x.value()}.spec());
  if (kKind == Reduce::kL1) x = c.emit(ir::AbsArgs{.x = x.value()}.spec());
  // From the last axis down, so that dropping one leaves the others' numbers as they were.
  std::sort(axes.rbegin(), axes.rend());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  for (int64_t a : axes) {
    x = kKind == Reduce::kMean
            ? c.emit(ir::ReduceMeanArgs{.x = x.value(), .axis = a, .keepdim = keepdims != 0}.spec())
            : c.emit(ir::ReduceSumArgs{.x = x.value(), .axis = a, .keepdim = keepdims != 0}.spec());
  }
  if (kKind == Reduce::kL2) x = c.emit(ir::SqrtArgs{.x = x.value()}.spec());
  if (kKind == Reduce::kLogSum) x = c.emit(ir::LogArgs{.x = x.value()}.spec());
  c.setOutput(0, x);
  return absl::OkStatus();
}

absl::Status dropout(NodeContext& c) {
  if (c.wantsOutput(1) && c.builder().training())
    return NodeContext::unsupported("the mask output in training");
  float ratio = 0.5f;
  bool training_mode = false;
  if (c.version() >= 12) {
    if (c.hasInput(1)) {
      ASSIGN_OR_RETURN(const OnnxTensor* r, c.constant(1));
      if (!r->isFloat() || r->numElements() != 1)
        return NodeContext::invalid("ratio is not a float scalar");
      ratio = r->floats[0];
    }
    if (c.hasInput(2)) {
      ASSIGN_OR_RETURN(const OnnxTensor* t, c.constant(2));
      if (t->numElements() != 1) return NodeContext::invalid("training_mode is not a scalar");
      training_mode = t->at(0) != 0;
    }
  } else {
    ASSIGN_OR_RETURN(ratio, c.attrFloat("ratio", 0.5f));
  }
  ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
  Builder& b = c.builder();
  if (!b.training()) {
    if (training_mode && ratio > 0)
      return NodeContext::unsupported("training_mode 1 (random masks) in an inference graph");
    if (c.wantsOutput(1)) {  // nothing dropped: a mask of trues
      OnnxTensor mask;
      mask.elem_type = onnx::TensorProto::BOOL;
      mask.shape = x.shape();
      mask.ints.assign(size_t(product(mask.shape)), 1);
      c.setOutput(1, std::move(mask));
    }
    return c.alias(0, 0);
  }
  if (!(ratio >= 0 && ratio < 1)) return NodeContext::invalid(absl::StrCat("ratio ", ratio));
  c.setOutput(0, ratio > 0 ? b.dropout(x, ratio) : x);
  return absl::OkStatus();
}

/// The padding p of a Pad that its readers can take into their own: zeros (constant mode,
/// value 0), p rows and columns on each side of an [N,C,H,W] tensor ([0,0,p,p,0,0,p,p]),
/// read as input X by convolutions (zero padding is theirs) and average pools (which count
/// padding as zeros, as avg_pool2d does) alone. 0 where it cannot be folded.
absl::StatusOr<int64_t> foldablePadding(NodeContext& c, const std::string& mode,
                                        const std::vector<int64_t>& pads) {
  if (mode != "constant" || pads.size() != 8 || pads[0] || pads[1] || pads[4] || pads[5]) return 0;
  const int64_t p = pads[2];
  if (p <= 0 || pads[3] != p || pads[6] != p || pads[7] != p) return 0;
  double value = 0;
  if (c.version() >= 11 && c.hasInput(2)) {
    ASSIGN_OR_RETURN(const OnnxTensor* v, c.constant(2));
    if (v->numElements() != 1) return 0;
    value = v->at(0);
  } else if (c.version() < 11) {
    ASSIGN_OR_RETURN(value, c.attrFloat("value", 0.0));
  }
  if (value != 0 || c.isGraphOutput(0)) return 0;
  for (const onnx::NodeProto* r : c.readers(0))
    if ((r->op_type() != "Conv" && r->op_type() != "AveragePool") || r->input_size() < 1 ||
        r->input(0) != c.node().output(0) ||
        std::count(r->input().begin(), r->input().end(), c.node().output(0)) != 1)
      return 0;
  return p;
}

absl::Status pad(NodeContext& c) {
  ASSIGN_OR_RETURN(std::string mode, c.attrString("mode", "constant"));
  std::vector<int64_t> pads;
  if (c.version() >= 11) {
    ASSIGN_OR_RETURN(pads, knownInts(c, 1));
  } else {
    ASSIGN_OR_RETURN(pads, c.attrInts(c.version() >= 2 ? "pads" : "paddings"));
  }
  // PyTorch 1.13 puts a Pad of zeros before every AvgPool2d it exports.
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) return c.alias(0, 0);
  ASSIGN_OR_RETURN(const int64_t folded, foldablePadding(c, mode, pads));
  if (folded > 0) {
    ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
    c.setPaddedOutput(0, x, folded);
    return absl::OkStatus();
  }
  // Otherwise the pad op, over every axis.
  const std::map<std::string, ir::PadMode> modes = {{"constant", ir::PadMode::kConstant},
                                                    {"reflect", ir::PadMode::kReflect},
                                                    {"edge", ir::PadMode::kEdge}};
  auto it = modes.find(mode);
  if (it == modes.end()) return NodeContext::unsupported(absl::StrCat("mode '", mode, "'"));
  ASSIGN_OR_RETURN(ir::Shape shape, c.shape(0));
  const size_t rank = shape.size();
  if (c.version() >= 18 && c.hasInput(3)) {  // pads of the listed axes only
    ASSIGN_OR_RETURN(std::vector<int64_t> axes, knownInts(c, 3));
    if (pads.size() != 2 * axes.size())
      return NodeContext::invalid(
          absl::StrCat("pads ", shapeText(pads), " for axes ", shapeText(axes), " (two per axis)"));
    std::vector<int64_t> all(2 * rank, 0);
    for (size_t k = 0; k < axes.size(); ++k) {
      ASSIGN_OR_RETURN(int64_t a, normalizeAxis(axes[k], int64_t(rank), "axis"));
      all[size_t(a)] = pads[k];
      all[size_t(a) + rank] = pads[k + axes.size()];
    }
    pads = std::move(all);
  }
  if (pads.size() != 2 * rank)
    return NodeContext::invalid(
        absl::StrCat("pads ", shapeText(pads), " for X ", shapeText(shape), " (two per axis)"));
  if (std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p < 0; }))
    return NodeContext::unsupported(
        absl::StrCat("pads ", shapeText(pads), " (a negative pad crops; Tandem pads only)"));
  if (mode == "reflect")
    for (size_t a = 0; a < rank; ++a)
      if (pads[a] >= shape[a] || pads[a + rank] >= shape[a])
        return NodeContext::unsupported(
            absl::StrCat("reflect padding ", shapeText(pads), " of X ", shapeText(shape),
                         " (each pad below its axis' extent: one reflection)"));
  double value = 0;
  if (c.version() >= 11 && c.hasInput(2)) {
    ASSIGN_OR_RETURN(const OnnxTensor* v, c.constant(2));
    if (v->numElements() != 1) return NodeContext::invalid("constant_value must be a scalar");
    value = v->at(0);
  } else if (c.version() < 11) {
    ASSIGN_OR_RETURN(float attr_value, c.attrFloat("value", 0.0f));
    value = attr_value;
  }
  ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
  c.setOutput(
      0,
      c.emit(ir::PadArgs{.x = x.value(), .pads = pads, .mode = it->second, .value = value}.spec()));
  return absl::OkStatus();
}

// --- values known at import time --------------------------------------------------------

absl::Status constant(NodeContext& c) {
  const onnx::AttributeProto* a = nullptr;
  for (const auto& attr : c.node().attribute()) a = &attr;
  if (a == nullptr || c.node().attribute_size() != 1)
    return NodeContext::invalid("Constant needs exactly one value attribute");
  OnnxTensor v;
  v.name = c.node().output(0);
  if (a->name() == "value") {
    ASSIGN_OR_RETURN(v, decodeTensor(a->t(), "attribute 'value'"));
    v.name = c.node().output(0);
  } else if (a->name() == "value_float") {
    v.floats = {a->f()};
  } else if (a->name() == "value_floats") {
    v.floats.assign(a->floats().begin(), a->floats().end());
    v.shape = {int64_t(v.floats.size())};
  } else if (a->name() == "value_int" || a->name() == "value_ints") {
    v.elem_type = onnx::TensorProto::INT64;
    if (a->name() == "value_int") {
      v.ints = {a->i()};
    } else {
      v.ints.assign(a->ints().begin(), a->ints().end());
      v.shape = {int64_t(v.ints.size())};
    }
  } else {
    return NodeContext::unsupported(absl::StrCat("attribute '", a->name(), "'"));
  }
  c.setOutput(0, std::move(v));
  return absl::OkStatus();
}

OnnxTensor int64Vector(std::vector<int64_t> values) {
  OnnxTensor v;
  v.elem_type = onnx::TensorProto::INT64;
  v.shape = {int64_t(values.size())};
  v.ints = std::move(values);
  return v;
}

absl::Status shapeOp(NodeContext& c) {
  ASSIGN_OR_RETURN(ir::Shape shape, c.shape(0));
  const int64_t rank = int64_t(shape.size());
  ASSIGN_OR_RETURN(int64_t start, c.attrInt("start", 0));
  ASSIGN_OR_RETURN(int64_t end, c.attrInt("end", rank));
  auto clamp = [rank](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
  start = clamp(start);
  end = std::max(clamp(end), start);
  c.setOutput(0, int64Vector(std::vector<int64_t>(shape.begin() + start, shape.begin() + end)));
  return absl::OkStatus();
}

absl::Status size(NodeContext& c) {
  ASSIGN_OR_RETURN(ir::Shape shape, c.shape(0));
  OnnxTensor v = int64Vector({product(shape)});
  v.shape = {};
  c.setOutput(0, std::move(v));
  return absl::OkStatus();
}

/// Gather of a tensor of the graph by indices known at import (ViT's class token out of
/// the tokens, x[:, 0]): the slices of each run of consecutive indices, joined, in the
/// result's shape.
absl::Status gatherTensor(NodeContext& c) {
  ASSIGN_OR_RETURN(std::vector<int64_t> indices, knownInts(c, 1));
  ASSIGN_OR_RETURN(const OnnxTensor* index_tensor, c.constant(1));
  ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
  const ir::Shape shape = x.shape();
  ASSIGN_OR_RETURN(int64_t axis_attr, c.attrInt("axis", 0));
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(axis_attr, int64_t(shape.size()), "axis"));
  if (indices.empty()) return NodeContext::unsupported("no indices (Tandem has no empty tensors)");
  const int64_t dim = shape[size_t(axis)];
  std::vector<std::pair<int64_t, int64_t>> runs;  // [start, end) along the axis
  for (int64_t idx : indices) {
    if (idx < -dim || idx >= dim)
      return NodeContext::invalid(
          absl::StrCat("index ", idx, " is outside [", -dim, ", ", dim, ")"));
    const int64_t at = idx < 0 ? idx + dim : idx;
    if (!runs.empty() && runs.back().second == at)
      ++runs.back().second;
    else
      runs.push_back({at, at + 1});
  }
  std::vector<ir::Value*> pieces;
  for (const auto& [start, end] : runs)
    pieces.push_back(
        start == 0 && end == dim
            ? x.value()
            : c.emit(ir::SliceAxisArgs{.x = x.value(), .axis = axis, .start = start, .end = end}
                         .spec())
                  .value());
  Tensor y = pieces.size() == 1
                 ? Tensor(pieces[0])
                 : c.emit(ir::ConcatAxisArgs{.xs = std::move(pieces), .axis = axis}.spec());
  ir::Shape out(shape.begin(), shape.begin() + axis);
  out.insert(out.end(), index_tensor->shape.begin(), index_tensor->shape.end());
  out.insert(out.end(), shape.begin() + axis + 1, shape.end());
  c.setOutput(0, reshapeTensor(c, y, out));
  return absl::OkStatus();
}

absl::Status gather(NodeContext& c) {
  if (!c.isConstant(1))
    return NodeContext::unsupported(
        "indices computed at run time (Tandem gathers by indices known at import)");
  if (!c.isConstant(0)) return gatherTensor(c);
  ASSIGN_OR_RETURN(const OnnxTensor* data, c.constant(0));
  ASSIGN_OR_RETURN(std::vector<int64_t> indices, knownInts(c, 1));
  ASSIGN_OR_RETURN(const OnnxTensor* index_tensor, c.constant(1));
  ASSIGN_OR_RETURN(int64_t axis_attr, c.attrInt("axis", 0));
  ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(axis_attr, int64_t(data->shape.size()), "axis"));
  const int64_t dim = data->shape[size_t(axis)];
  const int64_t outer = product(data->shape, 0, size_t(axis)),
                inner = product(data->shape, size_t(axis) + 1);
  OnnxTensor out;
  out.elem_type = data->elem_type;
  out.shape.assign(data->shape.begin(), data->shape.begin() + axis);
  out.shape.insert(out.shape.end(), index_tensor->shape.begin(), index_tensor->shape.end());
  out.shape.insert(out.shape.end(), data->shape.begin() + axis + 1, data->shape.end());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t idx : indices) {
      if (idx < -dim || idx >= dim)
        return NodeContext::invalid(
            absl::StrCat("index ", idx, " is outside [", -dim, ", ", dim, ")"));
      const int64_t at = (o * dim + (idx < 0 ? idx + dim : idx)) * inner;
      for (int64_t k = 0; k < inner; ++k) {
        if (data->isFloat())
          out.floats.push_back(data->floats[size_t(at + k)]);
        else
          out.ints.push_back(data->ints[size_t(at + k)]);
      }
    }
  c.setOutput(0, std::move(out));
  return absl::OkStatus();
}

bool isFloatType(int64_t t) {
  return t == onnx::TensorProto::FLOAT || t == onnx::TensorProto::DOUBLE;
}

/// A scalar f32 zero of the graph, which broadcasts against any tensor.
Tensor zeroScalar(NodeContext& c) {
  return c.emit(
      ir::ConstantArgs{.value = 0}.spec({.declared_types = {ir::TensorType{ir::DType::kF32, {}}}}));
}

/// Output 0 = (input 0 KIND 0) at run time: a boolean's Not (eq), a float cast to bool (ne).
absl::Status compareWithZero(NodeContext& c, ir::Comparison kind) {
  ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
  c.setOutput(
      0, c.emit(ir::CompareArgs{.a = x.value(), .b = zeroScalar(c).value(), .kind = kind}.spec()));
  return absl::OkStatus();
}

absl::Status cast(NodeContext& c) {
  ASSIGN_OR_RETURN(int64_t to, c.attrInt("to", 0));
  if (!c.isConstant(0)) {
    // Among float, double and bool: a boolean is held as 1 and 0 in f32 and both floats
    // are computed in f32 (docs/ONNX.md), so the identity, but for float to bool (x != 0).
    ASSIGN_OR_RETURN(int32_t from, c.elemType(0));
    const bool is_bool = to == onnx::TensorProto::BOOL, from_bool = from == onnx::TensorProto::BOOL;
    if (!(isFloatType(to) || is_bool) || !(isFloatType(from) || from_bool))
      return NodeContext::unsupported(absl::StrCat("a cast to ", elemTypeName(int32_t(to)),
                                                   " at run time (Tandem computes in float)"));
    if (!is_bool || from_bool) return identity(c);
    return compareWithZero(c, ir::Comparison::kNe);
  }
  ASSIGN_OR_RETURN(const OnnxTensor* v, c.constant(0));
  OnnxTensor out;
  out.elem_type = int32_t(to);
  out.shape = v->shape;
  const int64_t n = v->numElements();
  if (isFloatType(to)) {
    for (int64_t i = 0; i < n; ++i) out.floats.push_back(float(v->at(i)));
  } else if (to == onnx::TensorProto::BOOL || to == onnx::TensorProto::INT64 ||
             to == onnx::TensorProto::INT32) {
    for (int64_t i = 0; i < n; ++i) {
      const double x = v->at(i);
      out.ints.push_back(to == onnx::TensorProto::BOOL ? int64_t(x != 0) : int64_t(std::trunc(x)));
    }
  } else {
    return NodeContext::unsupported(absl::StrCat("a cast to ", elemTypeName(int32_t(to))));
  }
  c.setOutput(0, std::move(out));
  return absl::OkStatus();
}

absl::Status constantOfShape(NodeContext& c) {
  ASSIGN_OR_RETURN(std::vector<int64_t> shape, knownInts(c, 0));
  RETURN_IF_ERROR(checkKnownShape(shape, "shape"));
  OnnxTensor out;
  out.shape = toShape(shape);
  if (const onnx::AttributeProto* a = c.attr("value")) {
    ASSIGN_OR_RETURN(OnnxTensor v, decodeTensor(a->t(), "attribute 'value'"));
    if (v.numElements() != 1) return NodeContext::invalid("value has more than one element");
    out.elem_type = v.elem_type;
    if (v.isFloat())
      out.floats.assign(size_t(product(out.shape)), v.floats[0]);
    else
      out.ints.assign(size_t(product(out.shape)), v.ints[0]);
  } else {
    out.floats.assign(size_t(product(out.shape)), 0.0f);
  }
  c.setOutput(0, std::move(out));
  return absl::OkStatus();
}

// Comparisons, Not, Where and Mod: of values known at import (shape arithmetic, swin's
// masks) computed here; of values computed at run time the compare, where and mod ops,
// booleans held as 1 and 0 in f32 (ir/ops.td).

/// Whether every input of the node is known at import.
bool allKnown(NodeContext& c) {
  for (size_t i = 0; i < size_t(c.node().input_size()); ++i)
    if (c.hasInput(i) && !c.isConstant(i)) return false;
  return true;
}

/// The node's inputs as tensors of the graph (known values become buffers).
absl::StatusOr<std::vector<ir::Value*>> inputValues(NodeContext& c) {
  std::vector<ir::Value*> values;
  for (size_t i = 0; i < size_t(c.node().input_size()); ++i) {
    ASSIGN_OR_RETURN(Tensor t, c.tensor(i));
    values.push_back(t.value());
  }
  return values;
}

template <ir::Comparison kKind>
bool holds(double a, double b) {
  switch (kKind) {
    case ir::Comparison::kEq:
      return a == b;
    case ir::Comparison::kNe:
      return a != b;
    case ir::Comparison::kLt:
      return a < b;
    case ir::Comparison::kLe:
      return a <= b;
    case ir::Comparison::kGt:
      return a > b;
    case ir::Comparison::kGe:
      return a >= b;
  }
  return false;
}

/// Equal, Less, LessOrEqual, Greater, GreaterOrEqual.
template <ir::Comparison kKind>
absl::Status comparison(NodeContext& c) {
  if (!allKnown(c)) {
    ASSIGN_OR_RETURN(std::vector<ir::Value*> in, inputValues(c));
    c.setOutput(0, c.emit(ir::CompareArgs{.a = in[0], .b = in[1], .kind = kKind}.spec()));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const OnnxTensor* a, c.constant(0));
  ASSIGN_OR_RETURN(const OnnxTensor* b, c.constant(1));
  ASSIGN_OR_RETURN(OnnxTensor v, broadcastKnown({a, b}, {}, onnx::TensorProto::BOOL,
                                                [](const std::vector<double>& x) {
                                                  return holds<kKind>(x[0], x[1]);
                                                }));
  c.setOutput(0, std::move(v));
  return absl::OkStatus();
}

enum class Logic { kAnd, kOr, kXor };

/// And, Or, Xor of booleans: known ones computed here; at run time (1 and 0 in f32) And
/// is a * b != 0, Or a + b != 0, Xor a != b.
template <Logic kLogic>
absl::Status logical(NodeContext& c) {
  if (!allKnown(c)) {
    ASSIGN_OR_RETURN(std::vector<ir::Value*> in, inputValues(c));
    ir::Value* a = in[0];
    ir::Value* b = in[1];
    if (kLogic != Logic::kXor) {
      a = c.emit(kLogic == Logic::kAnd ? ir::MulBcastArgs{.a = a, .b = b}.spec()
                                       : ir::AddBcastArgs{.a = a, .b = b}.spec())
              .value();
      b = zeroScalar(c).value();
    }
    c.setOutput(0, c.emit(ir::CompareArgs{.a = a, .b = b, .kind = ir::Comparison::kNe}.spec()));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const OnnxTensor* a, c.constant(0));
  ASSIGN_OR_RETURN(const OnnxTensor* b, c.constant(1));
  ASSIGN_OR_RETURN(
      OnnxTensor v,
      broadcastKnown({a, b}, {}, onnx::TensorProto::BOOL, [](const std::vector<double>& x) {
        const bool p = x[0] != 0, q = x[1] != 0;
        return kLogic == Logic::kAnd ? p && q : kLogic == Logic::kOr ? p || q : p != q;
      }));
  c.setOutput(0, std::move(v));
  return absl::OkStatus();
}

absl::Status where(NodeContext& c) {
  if (!allKnown(c)) {
    ASSIGN_OR_RETURN(std::vector<ir::Value*> in, inputValues(c));
    c.setOutput(0, c.emit(ir::WhereArgs{.cond = in[0], .a = in[1], .b = in[2]}.spec()));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const OnnxTensor* cond, c.constant(0));
  ASSIGN_OR_RETURN(const OnnxTensor* x, c.constant(1));
  ASSIGN_OR_RETURN(const OnnxTensor* y, c.constant(2));
  if (x->elem_type != y->elem_type) return NodeContext::invalid("X and Y differ in type");
  ASSIGN_OR_RETURN(OnnxTensor v,
                   broadcastKnown({cond, x, y}, {}, x->elem_type, [](const std::vector<double>& a) {
                     return a[0] != 0 ? a[1] : a[2];
                   }));
  c.setOutput(0, std::move(v));
  return absl::OkStatus();
}

// Range and ScatterND compute masks and indices from shapes (swin's shifted windows build
// their attention mask so): values known at import, computed here.

/// Each input known at import, else the refusal naming the first that is not.
absl::Status expectKnownInputs(NodeContext& c, absl::string_view what) {
  for (size_t i = 0; i < size_t(c.node().input_size()); ++i)
    if (c.hasInput(i) && !c.isConstant(i))
      return NodeContext::unsupported(absl::StrCat("input ", i, " ('", c.node().input(int(i)),
                                                   "') computed at run time (Tandem computes ",
                                                   what, " of values known at import)"));
  return absl::OkStatus();
}

absl::Status mod(NodeContext& c) {
  ASSIGN_OR_RETURN(int64_t fmod, c.attrInt("fmod", 0));
  if (!allKnown(c)) {  // of floats (run-time values are), which ONNX takes with fmod 1 only
    if (!fmod) return NodeContext::invalid("fmod 0 on floats");
    ASSIGN_OR_RETURN(std::vector<ir::Value*> in, inputValues(c));
    c.setOutput(0, c.emit(ir::ModArgs{.a = in[0], .b = in[1], .fmod = true}.spec()));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const OnnxTensor* a, c.constant(0));
  ASSIGN_OR_RETURN(const OnnxTensor* b, c.constant(1));
  if (a->isFloat() != b->isFloat()) return NodeContext::invalid("A and B differ in type");
  if (a->isFloat() && !fmod) return NodeContext::invalid("fmod 0 on floats");
  bool by_zero = false;
  ASSIGN_OR_RETURN(OnnxTensor v,
                   broadcastKnown({a, b}, {}, a->elem_type, [&](const std::vector<double>& x) {
                     if (x[1] == 0) by_zero = true;
                     if (fmod || x[1] == 0) return std::fmod(x[0], x[1]);
                     // The divisor's sign, as Python's %.
                     double r = std::fmod(x[0], x[1]);
                     return r != 0 && (r < 0) != (x[1] < 0) ? r + x[1] : r;
                   }));
  if (by_zero && !a->isFloat()) return NodeContext::invalid("an integer division by zero");
  c.setOutput(0, std::move(v));
  return absl::OkStatus();
}

absl::Status range(NodeContext& c) {
  RETURN_IF_ERROR(expectKnownInputs(c, "Range"));
  std::vector<const OnnxTensor*> v(3);
  for (size_t i = 0; i < 3; ++i) {
    ASSIGN_OR_RETURN(v[i], c.constant(i));
    if (v[i]->numElements() != 1)
      return NodeContext::invalid(absl::StrCat("input ", i, " is not a scalar"));
  }
  const double start = v[0]->at(0), limit = v[1]->at(0), delta = v[2]->at(0);
  if (delta == 0) return NodeContext::invalid("delta 0");
  const double count = std::max(std::ceil((limit - start) / delta), 0.0);
  if (count == 0) return NodeContext::unsupported("an empty result (Tandem has no empty tensors)");
  if (count > double(int64_t{1} << 26))
    return NodeContext::unsupported(absl::StrCat("a range of ", count, " elements at import"));
  OnnxTensor out;
  out.elem_type = v[0]->elem_type;
  out.shape = {int64_t(count)};
  for (int64_t i = 0; i < int64_t(count); ++i) {
    const double x = start + double(i) * delta;
    if (out.isFloat())
      out.floats.push_back(float(x));
    else
      out.ints.push_back(int64_t(x));
  }
  c.setOutput(0, std::move(out));
  return absl::OkStatus();
}

absl::Status logicalNot(NodeContext& c) {
  if (!c.isConstant(0)) return compareWithZero(c, ir::Comparison::kEq);
  ASSIGN_OR_RETURN(const OnnxTensor* x, c.constant(0));
  OnnxTensor out = *x;
  out.name.clear();
  for (int64_t& b : out.ints) b = b == 0;
  c.setOutput(0, std::move(out));
  return absl::OkStatus();
}

/// ScatterND of known values (reduction none): data with each index tuple's slice
/// replaced by its update, in order (a later write of one place wins, as ONNX's reference).
/// ScatterND of data or updates computed at run time, by indices known at import
/// (x[:, 0] = y, index_put with constant indices): viewed as rows of the slice each index
/// tuple addresses, the result is the runs of data's rows and updates' rows in order,
/// sliced and joined (slice_axis, concat_axis), so both get their gradients.
absl::Status scatterNdTensor(NodeContext& c, const OnnxTensor& indices, size_t k) {
  ASSIGN_OR_RETURN(ir::Shape ds, c.shape(0));
  ASSIGN_OR_RETURN(ir::Shape us, c.shape(2));
  int64_t rows = 1, slice = 1;
  for (size_t a = 0; a < ds.size(); ++a) (a < k ? rows : slice) *= ds[a];
  const int64_t tuples = indices.numElements() / int64_t(k);
  if (product(us) != tuples * slice)
    return NodeContext::invalid("updates hold another number of elements than indices address");
  std::vector<int64_t> writer(size_t(rows), -1);  // the last tuple writing each row wins
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t at = 0;
    for (size_t a = 0; a < k; ++a) {
      const int64_t i = indices.ints[size_t(t) * k + a], dim = ds[a];
      if (i < -dim || i >= dim)
        return NodeContext::invalid(absl::StrCat("index ", i, " is outside an axis of ", dim));
      at = at * dim + (i < 0 ? i + dim : i);
    }
    writer[size_t(at)] = t;
  }
  struct Run {
    bool update;
    int64_t start, end;  // rows of data or of updates
  };
  std::vector<Run> runs;
  for (int64_t r = 0; r < rows; ++r) {
    const bool update = writer[size_t(r)] >= 0;
    const int64_t from = update ? writer[size_t(r)] : r;
    if (!runs.empty() && runs.back().update == update && runs.back().end == from)
      ++runs.back().end;
    else
      runs.push_back({update, from, from + 1});
  }
  constexpr size_t kMaxRuns = 1024;  // each run is a node: a scattered pattern is refused
  if (runs.size() > kMaxRuns)
    return NodeContext::unsupported(absl::StrCat("a scatter of run-time values into ", runs.size(),
                                                 " separate runs of rows (at most ", kMaxRuns,
                                                 ")"));
  ASSIGN_OR_RETURN(Tensor data, c.tensor(0));
  ASSIGN_OR_RETURN(Tensor updates, c.tensor(2));
  const Tensor sources[] = {reshapeTensor(c, data, {rows, slice}),
                            reshapeTensor(c, updates, {tuples, slice})};
  std::vector<ir::Value*> pieces;
  for (const Run& run : runs) {
    const Tensor& from = sources[run.update ? 1 : 0];
    pieces.push_back(
        run.start == 0 && run.end == from.shape()[0]
            ? from.value()
            : c.emit(ir::SliceAxisArgs{
                         .x = from.value(), .axis = 0, .start = run.start, .end = run.end}
                         .spec())
                  .value());
  }
  Tensor y = pieces.size() == 1
                 ? Tensor(pieces[0])
                 : c.emit(ir::ConcatAxisArgs{.xs = std::move(pieces), .axis = 0}.spec());
  c.setOutput(0, reshapeTensor(c, y, ds));
  return absl::OkStatus();
}

absl::Status scatterNd(NodeContext& c) {
  ASSIGN_OR_RETURN(std::string reduction, c.attrString("reduction", "none"));
  if (reduction != "none") return NodeContext::unsupported(absl::StrCat("reduction ", reduction));
  if (!c.isConstant(1))
    return NodeContext::unsupported(
        "indices computed at run time (Tandem scatters by indices known at import)");
  if (!c.isConstant(0) || !c.isConstant(2)) {
    ASSIGN_OR_RETURN(const OnnxTensor* indices, c.constant(1));
    ASSIGN_OR_RETURN(ir::Shape ds, c.shape(0));
    if (indices->isFloat() || indices->shape.empty() || indices->shape.back() < 1 ||
        size_t(indices->shape.back()) > ds.size())
      return NodeContext::invalid(
          "indices must be integers of rank >= 1, their last axis a "
          "count of data's leading axes");
    return scatterNdTensor(c, *indices, size_t(indices->shape.back()));
  }
  ASSIGN_OR_RETURN(const OnnxTensor* data, c.constant(0));
  ASSIGN_OR_RETURN(const OnnxTensor* indices, c.constant(1));
  ASSIGN_OR_RETURN(const OnnxTensor* updates, c.constant(2));
  if (indices->isFloat() || indices->shape.empty())
    return NodeContext::invalid("indices must be integers of rank >= 1");
  const size_t k = size_t(indices->shape.back());
  if (k == 0 || k > data->shape.size() || updates->elem_type != data->elem_type)
    return NodeContext::invalid("indices' last axis or the updates' type does not fit data");
  int64_t slice = 1;  // elements of data per index tuple
  for (size_t a = k; a < data->shape.size(); ++a) slice *= data->shape[a];
  const int64_t tuples = indices->numElements() / int64_t(k);
  if (updates->numElements() != tuples * slice)
    return NodeContext::invalid("updates hold another number of elements than indices address");
  OnnxTensor out = *data;
  out.name.clear();
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t at = 0;
    for (size_t a = 0; a < k; ++a) {
      int64_t i = indices->ints[size_t(t) * k + a];
      const int64_t dim = data->shape[a];
      if (i < -dim || i >= dim)
        return NodeContext::invalid(absl::StrCat("index ", i, " is outside an axis of ", dim));
      at = at * dim + (i < 0 ? i + dim : i);
    }
    for (int64_t e = 0; e < slice; ++e) {
      const size_t to = size_t(at * slice + e), from = size_t(t * slice + e);
      if (out.isFloat())
        out.floats[to] = updates->floats[from];
      else
        out.ints[to] = updates->ints[from];
    }
  }
  c.setOutput(0, std::move(out));
  return absl::OkStatus();
}

/// Whether every reader of Expand's output broadcasts it itself along the axes it expands:
/// a Concat along another axis (concat_axis repeats a size-1 axis: ViT's class token
/// [1,1,D] beside the tokens [N,T,D]).
bool readersBroadcast(NodeContext& c, const ir::Shape& from, const ir::Shape& to) {
  const std::vector<const onnx::NodeProto*> readers = c.readers(0);
  if (readers.empty() || c.isGraphOutput(0) || from.size() != to.size()) return false;
  for (const onnx::NodeProto* r : readers) {
    if (r->op_type() != "Concat" || !(r->domain().empty() || r->domain() == "ai.onnx"))
      return false;
    int64_t axis = 0;
    for (const auto& a : r->attribute())
      if (a.name() == "axis") axis = a.i();
    if (axis < 0) axis += int64_t(to.size());
    if (axis < 0 || axis >= int64_t(to.size()) || from[size_t(axis)] != to[size_t(axis)])
      return false;
  }
  return true;
}

absl::Status expand(NodeContext& c) {
  ASSIGN_OR_RETURN(ir::Shape in, c.shape(0));
  ASSIGN_OR_RETURN(std::vector<int64_t> target, knownInts(c, 1));
  for (int64_t d : target)
    if (d < 0)
      return NodeContext::invalid(absl::StrCat("shape ", shapeText(target), " is negative"));
  std::optional<ir::Shape> out = broadcastShapes(in, toShape(target));
  if (!out)
    return NodeContext::invalid(absl::StrCat(
        "shape ", shapeText(target), " does not broadcast with the input's ", shapeText(in)));
  if (product(*out) == 0)
    return NodeContext::unsupported("an empty result (Tandem has no empty tensors)");
  // Integers are shape arithmetic and floats computed from constants masks (swin's
  // window masks), computed here; a weight (ViT's class token, an initializer) stays one
  // variable, trained as such, and is broadcast in the graph.
  ASSIGN_OR_RETURN(int32_t type, c.elemType(0));
  if (c.isConstant(0) && (type != onnx::TensorProto::FLOAT || !c.isWeight(0))) {
    ASSIGN_OR_RETURN(const OnnxTensor* v, c.constant(0));
    ASSIGN_OR_RETURN(
        OnnxTensor r,
        broadcastKnown({v}, *out, v->elem_type, [](const std::vector<double>& a) { return a[0]; }));
    c.setOutput(0, std::move(r));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(Tensor x, c.tensor(0));
  // Of the rank of the result (a leading 1 per missing axis), as numpy lines them up.
  ir::Shape padded(out->size() - x.shape().size(), 1);
  padded.insert(padded.end(), x.shape().begin(), x.shape().end());
  x = reshapeTensor(c, x, padded);
  if (x.shape() == *out) {
    c.setOutput(0, x);
  } else if (readersBroadcast(c, x.shape(), *out)) {
    // Left as it is: the batch is then nowhere in the graph (a constant of ones of the
    // result's shape would hold it), so replicate splits the model as the zoo's ViT.
    c.setBroadcastOutput(0, x, *out);
  } else {
    c.setOutput(0, expandTensor(c, x, *out));
  }
  return absl::OkStatus();
}

/// The op the spec maps one to one to an ONNX op (`onnx NAME SINCE..UNTIL` in ir/ops.td):
/// its inputs are the op's operands in order, its output the op's result.
Converter oneToOne(ir::Op op) {
  return [op](NodeContext& c) -> absl::Status {
    ir::NodeSpec spec{.op = op};
    for (size_t i = 0; i < ir::opInfo(op).operands.size(); ++i) {
      ASSIGN_OR_RETURN(Tensor t, c.tensor(i));
      spec.operands.push_back(t.value());
    }
    c.setOutput(0, c.emit(std::move(spec)));
    return absl::OkStatus();
  };
}

/// The hand-written converters and a generated one per op the spec maps one to one.
std::map<std::string, OpConverter>* makeTable();

const std::map<std::string, OpConverter>& table() {
  static const auto* t = makeTable();
  return *t;
}

std::map<std::string, OpConverter>* makeTable() {
  // min_version: the oldest schema of the op whose meaning the converter implements.
  auto* t = new std::map<std::string, OpConverter>{
      {"Add", {6, arith(Arith::kAdd)}},
      {"And", {7, logical<Logic::kAnd>}},
      {"AveragePool", {1, pool<false>}},
      {"BatchNormalization", {6, batchNormalization}},
      {"Cast", {6, cast}},
      {"Clip", {6, clip}},
      {"Concat", {4, concat}},
      {"Constant", {1, constant}},
      {"ConstantOfShape", {9, constantOfShape}},
      {"Conv", {1, conv}},
      {"Div", {6, arith(Arith::kDiv)}},
      {"Dropout", {7, dropout}},
      {"Einsum", {12, einsum}},
      {"Equal", {7, comparison<ir::Comparison::kEq>}},
      {"Erf", {9, knownOr(erfOf, ir::Op::kErf)}},
      {"Expand", {8, expand}},
      {"Flatten", {1, flatten}},
      {"Gather", {1, gather}},
      {"Gemm", {6, gemm}},
      {"GlobalAveragePool", {1, globalAveragePool}},
      {"Greater", {7, comparison<ir::Comparison::kGt>}},
      {"GreaterOrEqual", {12, comparison<ir::Comparison::kGe>}},
      {"HardSigmoid", {6, hardSigmoid}},
      {"Identity", {1, identity}},
      {"LayerNormalization", {17, layerNormalization}},
      {"Less", {7, comparison<ir::Comparison::kLt>}},
      {"LessOrEqual", {12, comparison<ir::Comparison::kLe>}},
      {"LogSoftmax", {1, softmaxLike<ir::LogSoftmaxArgs>}},
      {"MatMul", {1, matmul}},
      {"MaxPool", {1, pool<true>}},
      {"Mod", {10, mod}},
      {"Mul", {6, arith(Arith::kMul)}},
      {"Neg", {6, neg}},
      {"Not", {1, logicalNot}},
      {"Or", {7, logical<Logic::kOr>}},
      {"Pad", {2, pad}},
      {"Pow", {7, power}},
      {"ReduceL1", {1, reduce<Reduce::kL1>}},
      {"ReduceL2", {1, reduce<Reduce::kL2>}},
      {"ReduceLogSum", {1, reduce<Reduce::kLogSum>}},
      {"ReduceMean", {1, reduce<Reduce::kMean>}},
      {"Range", {11, range}},
      {"ReduceSum", {1, reduce<Reduce::kSum>}},
      {"ReduceSumSquare", {1, reduce<Reduce::kSumSquare>}},
      {"Reshape", {5, reshape}},
      {"ScatterND", {11, scatterNd}},
      {"Shape", {1, shapeOp}},
      {"Size", {1, size}},
      {"Slice", {1, slice}},
      {"Softmax", {1, softmaxLike<ir::SoftmaxArgs>}},
      {"Sqrt", {6, knownOr(sqrtOf, ir::Op::kSqrt)}},
      {"Squeeze", {1, squeeze}},
      {"Sub", {6, arith(Arith::kSub)}},
      {"Sum", {6, sum}},
      {"Transpose", {1, transpose}},
      {"Unsqueeze", {1, unsqueeze}},
      {"Where", {9, where}},
      {"Xor", {7, logical<Logic::kXor>}},
  };
  // The ops the spec maps one to one whose known inputs the importer computes itself (the
  // converters above, which emit the op otherwise).
  const std::set<std::string> folding = {"Erf", "Sqrt"};
  for (const ir::OpInfo& info : ir::allOps())
    if (info.onnx != nullptr && !folding.count(std::string(info.onnx->name))) {
      const bool fresh =
          t->emplace(std::string(info.onnx->name), OpConverter{.min_version = info.onnx->since,
                                                               .convert = oneToOne(info.op),
                                                               .max_version = info.onnx->until})
              .second;
      assert(fresh && "an ONNX op mapped by ir/ops.td has a hand-written converter too");
      (void)fresh;
    }
  return t;
}

const std::map<std::string, OpConverter>& fusedTable() {
  static const auto* t = new std::map<std::string, OpConverter>{
      {kFusedGelu, {0, fusedGelu}},
      {kFusedLayerNorm, {0, fusedLayerNorm}},
      {kFusedSilu, {0, [](NodeContext& c) { return emitUnary(c, ir::Op::kSilu); }}},
  };
  return *t;
}

}  // namespace

const OpConverter* findConverter(const std::string& op_type) {
  auto it = table().find(op_type);
  return it == table().end() ? nullptr : &it->second;
}

const OpConverter* findFusedConverter(const std::string& op_type) {
  auto it = fusedTable().find(op_type);
  return it == fusedTable().end() ? nullptr : &it->second;
}

std::vector<std::string> supportedOps() {
  std::vector<std::string> out;
  for (const auto& [name, c] : table()) out.push_back(name);
  return out;
}

}  // namespace tandem::onnx_import

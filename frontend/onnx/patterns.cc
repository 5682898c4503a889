#include "frontend/onnx/patterns.h"

#include <cmath>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/onnx/graph_index.h"

namespace tandem::onnx_import {
namespace {

/// Input k of `n`, or "" where it has none (a node ONNX's checker let through with fewer
/// inputs than the pattern's op takes never matches, and is never read past its end).
const std::string& arg(const onnx::NodeProto& n, int k) {
  static const std::string kNone;
  return k < n.input_size() ? n.input(k) : kNone;
}

/// Output 0 of `n`, or "".
const std::string& result(const onnx::NodeProto& n) {
  static const std::string kNone;
  return n.output_size() > 0 ? n.output(0) : kNone;
}

/// A match, or why the pattern does not hold (`why` set).
struct Attempt {
  std::optional<Fusion> fusion;
  std::string why;
};

Attempt miss(std::string why) { return Attempt{std::nullopt, std::move(why)}; }

Fusion fused(const GraphIndex& gi, const char* op, int root, std::set<int> members,
             std::vector<std::string> inputs) {
  Fusion f;
  f.node.set_op_type(op);
  f.node.set_name(gi.node(root).name());
  for (std::string& in : inputs) f.node.add_input(std::move(in));
  for (const std::string& out : gi.node(root).output()) f.node.add_output(out);
  members.insert(root);
  f.members = std::move(members);
  f.root = root;
  return f;
}

/// x/sqrt(2) -> Erf -> +1, multiplied by x and 0.5 in any order, from the Erf `ie`.
Attempt matchGelu(const GraphIndex& gi, int ie) {
  const onnx::NodeProto& e = gi.node(ie);
  if (e.input_size() != 1 || e.output_size() != 1) return miss("not one input and one output");
  const int id = gi.producer(arg(e, 0));
  if (id < 0) return miss("its input is not x / sqrt(2) computed by a Div");
  const onnx::NodeProto& d = gi.node(id);
  std::string x;
  if (GraphIndex::is(d, "Div") && d.input_size() == 2 && gi.isScalar(arg(d, 1), M_SQRT2)) {
    x = arg(d, 0);
  } else if (GraphIndex::is(d, "Mul") && d.input_size() == 2) {
    for (int k = 0; k < 2 && x.empty(); ++k)
      if (gi.isScalar(d.input(k), M_SQRT1_2)) x = d.input(1 - k);
  }
  if (x.empty()) {
    std::optional<double> by = d.input_size() == 2 ? gi.scalar(arg(d, 1)) : std::nullopt;
    return miss(absl::StrCat("its input, node ", gi.describe(id), ", is not x / sqrt(2)",
                             by ? absl::StrCat(" (its operand is ", *by, ")") : ""));
  }
  if (!gi.readOnlyBy(arg(e, 0), {ie}))
    return miss(absl::StrCat("x / sqrt(2) (node ", gi.describe(id), ") is read elsewhere too"));
  const int ia = gi.soleReader(result(e));
  if (ia < 0 || !GraphIndex::is(gi.node(ia), "Add") ||
      !gi.isScalar(GraphIndex::other(gi.node(ia), result(e)), 1.0))
    return miss("its output is not read by one Add of 1 alone");
  const std::string a = result(gi.node(ia));
  const int i1 = gi.soleReader(a);
  if (i1 < 0 || !GraphIndex::is(gi.node(i1), "Mul"))
    return miss("1 + erf(x / sqrt(2)) is not read by one Mul alone");
  const std::string y = GraphIndex::other(gi.node(i1), a);
  const std::string m1 = result(gi.node(i1));
  // (1 + erf) * x * 0.5, (1 + erf) * 0.5 * x, or (1 + erf) * (x * 0.5).
  if (y == x || gi.isScalar(y, 0.5)) {
    const int i2 = gi.soleReader(m1);
    const std::string last = i2 < 0 ? "" : GraphIndex::other(gi.node(i2), m1);
    if (i2 >= 0 && GraphIndex::is(gi.node(i2), "Mul") &&
        (y == x ? gi.isScalar(last, 0.5) : last == x))
      return Attempt{fused(gi, kFusedGelu, i2, {id, ie, ia, i1}, {x}), ""};
  } else if (const int ih = gi.producer(y); ih >= 0 && GraphIndex::is(gi.node(ih), "Mul") &&
                                            gi.isScalar(GraphIndex::other(gi.node(ih), x), 0.5) &&
                                            gi.readOnlyBy(y, {i1})) {
    return Attempt{fused(gi, kFusedGelu, i1, {id, ie, ia, ih}, {x}), ""};
  }
  return miss("1 + erf(x / sqrt(2)) is not multiplied by x and 0.5");
}

/// x * Sigmoid(x) (nn.SiLU as torch.onnx writes it), from the Sigmoid `is`: its output read
/// by one Mul alone, whose other operand is the Sigmoid's input.
Attempt matchSilu(const GraphIndex& gi, int is) {
  const onnx::NodeProto& sg = gi.node(is);
  if (sg.input_size() != 1 || sg.output_size() != 1) return miss("not one input and one output");
  const int im = gi.soleReader(result(sg));
  if (im < 0 || !GraphIndex::is(gi.node(im), "Mul") || gi.node(im).input_size() != 2 ||
      GraphIndex::other(gi.node(im), result(sg)) != arg(sg, 0))
    return miss("its output is not read by one Mul by its input alone");
  return Attempt{fused(gi, kFusedSilu, im, {is}, {arg(sg, 0)}), ""};
}

/// ReduceMean's axes when it keeps its dimensions, or nullopt.
std::optional<std::vector<int64_t>> keptAxes(const onnx::NodeProto& n) {
  std::optional<std::vector<int64_t>> axes;
  for (const auto& a : n.attribute()) {
    if (a.name() == "keepdims" && a.i() != 1) return std::nullopt;
    if (a.name() == "axes") axes = std::vector<int64_t>(a.ints().begin(), a.ints().end());
  }
  return axes;
}

/// m = ReduceMean(x), d = x - m, d / Sqrt(ReduceMean(d^2) + eps) [* gamma] [+ beta],
/// from the Sqrt `iq`.
Attempt matchLayerNorm(const GraphIndex& gi, int iq) {
  const onnx::NodeProto& q = gi.node(iq);
  if (q.input_size() != 1 || q.output_size() != 1) return miss("not one input and one output");
  const int ie = gi.producer(arg(q, 0));
  std::string v;
  std::optional<double> eps;
  if (ie >= 0 && GraphIndex::is(gi.node(ie), "Add") && gi.node(ie).input_size() == 2) {
    for (int k = 0; k < 2 && v.empty(); ++k)
      if ((eps = gi.scalar(gi.node(ie).input(k)))) v = gi.node(ie).input(1 - k);
  }
  const int ir2 = v.empty() ? -1 : gi.producer(v);
  if (ir2 < 0 || !GraphIndex::is(gi.node(ir2), "ReduceMean") || !(*eps > 0))
    return miss("its input is not a ReduceMean plus a positive constant (variance + eps)");
  const std::optional<std::vector<int64_t>> axes = keptAxes(gi.node(ir2));
  if (!axes || axes->empty())
    return miss(absl::StrCat("the variance's node ", gi.describe(ir2),
                             " does not name its axes and keep them"));
  const int ip = gi.producer(arg(gi.node(ir2), 0));
  std::string d;
  if (ip >= 0 && GraphIndex::is(gi.node(ip), "Pow") && gi.node(ip).input_size() == 2 &&
      gi.isScalar(arg(gi.node(ip), 1), 2.0))
    d = arg(gi.node(ip), 0);
  else if (ip >= 0 && GraphIndex::is(gi.node(ip), "Mul") && gi.node(ip).input_size() == 2 &&
           arg(gi.node(ip), 0) == arg(gi.node(ip), 1))
    d = arg(gi.node(ip), 0);
  const int is = d.empty() ? -1 : gi.producer(d);
  if (is < 0 || !GraphIndex::is(gi.node(is), "Sub") || gi.node(is).input_size() != 2)
    return miss("the variance is not the mean of (x - mean)^2");
  const std::string x = arg(gi.node(is), 0), m = arg(gi.node(is), 1);
  const int ir1 = gi.producer(m);
  if (ir1 < 0 || !GraphIndex::is(gi.node(ir1), "ReduceMean") || arg(gi.node(ir1), 0) != x ||
      keptAxes(gi.node(ir1)) != axes)
    return miss("x - mean does not subtract x's ReduceMean over the variance's axes");
  const int iv = gi.soleReader(result(q));
  if (iv < 0 || !GraphIndex::is(gi.node(iv), "Div") || arg(gi.node(iv), 0) != d ||
      arg(gi.node(iv), 1) != result(q))
    return miss("its output is not read by one Div of (x - mean) by it alone");
  if (!gi.readOnlyBy(d, {ip, iv}) || !gi.readOnlyBy(m, {is}) ||
      !gi.readOnlyBy(result(gi.node(ip)), {ir2}) || !gi.readOnlyBy(v, {ie}) ||
      !gi.readOnlyBy(arg(q, 0), {iq}))
    return miss("a value inside the layer norm is read elsewhere too");
  std::set<int> members{ir1, is, ip, ir2, ie, iq};
  int root = iv;
  std::string gamma, beta;
  // The affine part where its weights are known (nn.LayerNorm's): gamma and beta.
  if (const int ig = gi.soleReader(result(gi.node(root)));
      ig >= 0 && GraphIndex::is(gi.node(ig), "Mul")) {
    const std::string w = GraphIndex::other(gi.node(ig), result(gi.node(root)));
    if (!w.empty() && gi.known(w)) {
      members.insert(root);
      root = ig;
      gamma = w;
    }
  }
  if (const int ib = gi.soleReader(result(gi.node(root)));
      ib >= 0 && GraphIndex::is(gi.node(ib), "Add")) {
    const std::string b = GraphIndex::other(gi.node(ib), result(gi.node(root)));
    if (!b.empty() && gi.known(b)) {
      members.insert(root);
      root = ib;
      beta = b;
    }
  }
  Fusion f = fused(gi, kFusedLayerNorm, root, std::move(members), {x, gamma, beta});
  auto* a = f.node.add_attribute();
  a->set_name("axes");
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t ax : *axes) a->add_ints(ax);
  auto* e = f.node.add_attribute();
  e->set_name("epsilon");
  e->set_type(onnx::AttributeProto::FLOAT);
  e->set_f(float(*eps));
  return Attempt{std::move(f), ""};
}

}  // namespace

Fusions findFusions(const GraphIndex& gi) {
  const onnx::GraphProto& g = gi.graph();
  Fusions out;
  std::set<int> taken;
  for (int i = 0; i < g.node_size(); ++i) {
    const bool erf = GraphIndex::is(g.node(i), "Erf"), sqrt = GraphIndex::is(g.node(i), "Sqrt");
    const bool sigmoid = GraphIndex::is(g.node(i), "Sigmoid");
    if (!erf && !sqrt && !sigmoid) continue;
    Attempt a = erf ? matchGelu(gi, i) : sqrt ? matchLayerNorm(gi, i) : matchSilu(gi, i);
    if (a.fusion) {
      bool overlaps = false;
      for (int k : a.fusion->members) overlaps = overlaps || taken.contains(k);
      if (overlaps) a = miss("it shares nodes with another pattern");
      // ONNX's checker keeps nodes in topological order, so the root, which reads every
      // other member's result, comes last; the walk converts the pattern there.
      else if (*a.fusion->members.rbegin() != a.fusion->root)
        a = miss("its nodes are not in topological order");
    }
    if (!a.fusion) {
      if (!sigmoid) out.near_misses[i] = std::move(a.why);  // a lone Sigmoid is no miss
      continue;
    }
    const int root = a.fusion->root;
    for (int k : a.fusion->members) {
      taken.insert(k);
      if (k != root) out.interior.insert(k);
    }
    out.by_root[root] = std::move(*a.fusion);
  }
  return out;
}

}  // namespace tandem::onnx_import

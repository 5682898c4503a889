#include "ir/op_cost.h"

#include "ir/ir.h"

namespace tandem::ir {
namespace {

const Value& valueAt(const Node& n, CostArg r) {
  return r.side == CostArg::kOperand ? *n.operand(r.index) : *n.result(r.index);
}

double elements(const Value& v) { return static_cast<double>(v.type().numElements()); }

}  // namespace

OpWork opWork(const Node& n) {
  const CostSpec& c = n.info().cost;
  OpWork w;
  if (!c.work) return w;
  for (const Value* v : n.operands()) {
    w.bytes += static_cast<double>(v->type().bytes());
    w.low_precision = w.low_precision || v->type().dtype == DType::kBF16;
  }
  for (size_t i = 0; i < n.numResults(); ++i)
    w.bytes += static_cast<double>(n.result(i)->type().bytes());
  w.flops = c.flops(n, c);
  return w;
}

namespace cost {

double none(const Node&, const CostSpec&) { return 0; }

double elementwise(const Node& n, const CostSpec& c) {
  double out = 0;
  for (size_t i = 0; i < n.numResults(); ++i) out += elements(*n.result(i));
  return c.per_element * out;
}

double gemm(const Node& n, const CostSpec& c) {
  const Value& filter = valueAt(n, c.a);
  const double per_output = elements(filter) / static_cast<double>(filter.type().shape[0]);
  return 2 * elements(valueAt(n, c.b)) * per_output;
}

double matmul(const Node& n, const CostSpec& c) {
  return 2 * elements(valueAt(n, c.a)) * static_cast<double>(valueAt(n, c.b).type().shape.back());
}

double contraction(const Node& n, const CostSpec& c) {
  // A matmul's a is [..., M, K], or [..., K, M] under trans_a: K is the axis summed over.
  const Shape& a = valueAt(n, c.a).type().shape;
  const bool trans = n.info().attrIndex("trans_a") >= 0 && n.boolAttr("trans_a");
  const int64_t k = a.size() < 2 ? 1 : a[a.size() - (trans ? 2 : 1)];
  return 2 * elements(valueAt(n, c.b)) * static_cast<double>(k);
}

double attention(const Node& n, const CostSpec& c) {
  const Shape& keys = valueAt(n, c.b).type().shape;
  return 4 * elements(valueAt(n, c.a)) * static_cast<double>(keys.size() < 2 ? 1 : keys[1]);
}

double attention_backward(const Node& n, const CostSpec& c) { return 2.5 * attention(n, c); }

double conv_pool(const Node& n, const CostSpec& c) { return 4 * gemm(n, c); }

double reduction(const Node& n, const CostSpec& c) { return elements(valueAt(n, c.a)); }

}  // namespace cost
}  // namespace tandem::ir

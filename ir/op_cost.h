#pragma once

// The cost-model entry of every op: the spec (ir/ops.td) names a formula per op and the
// generated table points at one of the functions below, so an op without a formula, or
// with one that does not exist, does not build. sim/roofline.cc turns the work into time.

#include <cstdint>

namespace tandem::ir {

class Node;
struct CostSpec;

/// An operand or a result of a node, by position.
struct CostArg {
  enum Side : uint8_t { kOperand, kResult };
  Side side = kOperand;
  uint8_t index = 0;
};

/// The flops of one node under a formula.
using CostFn = double (*)(const Node&, const CostSpec&);

/// One op's cost-model entry.
struct CostSpec {
  CostFn flops = nullptr;
  /// False for ops that do no work (graph inputs, variable reads, constants, collectives,
  /// which the communication model costs): no flops, no bytes.
  bool work = true;
  /// elementwise: flops per result element.
  double per_element = 1;
  /// gemm: the filter and the (forward) output; matmul: the two matrices.
  CostArg a, b;
};

/// The arithmetic and memory traffic of one node (one device's share).
struct OpWork {
  double flops = 0;            // multiply-adds count 2
  double bytes = 0;            // every operand read once, every result written once
  bool low_precision = false;  // a bf16 operand: the bf16 peak applies
};

/// The work of `n` by its op's formula; bytes are every operand and result once.
OpWork opWork(const Node& n);

namespace cost {
/// No work.
double none(const Node& n, const CostSpec& c);
/// `per_element` flops per result element (memory-bound ops).
double elementwise(const Node& n, const CostSpec& c);
/// 2 * elements(b) * (elements(a) / a.shape[0]): a convolution or linear pass with filter a
/// and (forward) output b.
double gemm(const Node& n, const CostSpec& c);
/// 2 * elements(a) * b.shape.back(): a^T b of [N,O] and [N,I] matrices.
double matmul(const Node& n, const CostSpec& c);
/// 2 * elements(b) * K: a (batched) product with output b whose operand a is [..., M, K],
/// or [..., K, M] when the node's trans_a is set.
double contraction(const Node& n, const CostSpec& c);
/// 4 * elements(a) * b.shape[1]: attention's two products (scores q k^T, then
/// probabilities times v) for queries a and keys b, both [N, T, H*d]; the causal mask's
/// half is not subtracted (a roofline, not a count).
double attention(const Node& n, const CostSpec& c);
/// Its backward: the scores again, then four products (dv, dp, dq, dk): 2.5 times the
/// forward's.
double attention_backward(const Node& n, const CostSpec& c);
/// 4 * gemm(a, b): a convolution pass with filter a whose output a 2x2 average pool makes
/// b (conv2d_relu_avg_pool and its filter gradient: four convolution outputs per element
/// of b).
double conv_pool(const Node& n, const CostSpec& c);
/// elements(a): one flop per element of the reduced value a (a sum or mean over an axis,
/// whose result is smaller than what it reads).
double reduction(const Node& n, const CostSpec& c);
}  // namespace cost

}  // namespace tandem::ir

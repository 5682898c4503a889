#pragma once

// The optimizer nodes' operand layout, in one place for the shape rules, the verifier,
// the passes and the kernels: sgd_update(w, g, m?) steps one parameter;
// sgd_update_group(w_1..w_k, g_1..g_k, m_1..m_k?) steps k parameters of one device.

#include <cstddef>
#include <vector>

#include "ir/ir.h"

namespace tandem::ir {

/// Where parameter j's operands are in an sgd_update_group node.
struct SgdGroupLayout {
  size_t k = 0;           // parameters
  bool momentum = false;  // m_1..m_k follow the gradients

  /// 3 operand streams with momentum buffers, else 2.
  static size_t streams(bool momentum) { return momentum ? 3 : 2; }
  size_t weight(size_t j) const { return j; }
  size_t gradient(size_t j) const { return k + j; }
  size_t buffer(size_t j) const { return 2 * k + j; }
};

/// The layout of an sgd_update_group node (k = 0 when its operand count does not fit the
/// momentum attribute: the shape rule reports that).
inline SgdGroupLayout sgdGroupLayout(const Node& n) {
  const bool momentum = n.floatAttr("momentum") > 0;
  const size_t streams = SgdGroupLayout::streams(momentum);
  return {n.numOperands() % streams == 0 ? n.numOperands() / streams : 0, momentum};
}

/// sgd_update or sgd_update_group.
inline bool isUpdate(Op op) { return op == Op::kSgdUpdate || op == Op::kSgdUpdateGroup; }

/// The gradients an optimizer node reads: sgd_update's one, sgd_update_group's k; none
/// for any other node.
inline std::vector<const Value*> updateGradients(const Node& n) {
  if (n.op() == Op::kSgdUpdate) return {n.operand(1)};
  if (n.op() != Op::kSgdUpdateGroup) return {};
  const SgdGroupLayout layout = sgdGroupLayout(n);
  std::vector<const Value*> out;
  for (size_t j = 0; j < layout.k; ++j) out.push_back(n.operand(layout.gradient(j)));
  return out;
}

}  // namespace tandem::ir

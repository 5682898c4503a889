#pragma once

// SGD's multi-tensor layout for the kernels that run it: sgd_update(w, g, m?) steps one
// parameter; sgd_update_group(w_1..w_k, g_1..g_k, m_1..m_k?) steps k parameters of one
// device. Passes do not use this: they ask any optimizer through ir/interfaces.h.

#include <cstddef>
#include <vector>

#include "ir/interfaces.h"

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
  const UpdateView u = *UpdateView::of(n);
  return {u.numParams(), !u.presentStates().empty()};
}

/// An optimizer update (any optimizer, single or grouped form).
inline bool isUpdate(Op op) { return opInfo(op).has(kOptimizer); }

}  // namespace tandem::ir

#pragma once

// The MatmulShape (backend/matmul_shape.h) of a matmul node, as both backends' kernels
// read it: the batch is every leading axis of the result flattened, and an operand of
// rank 2 beside a batched one is shared by the batch (the shape rule, ir/ops/matmul_ops.cc,
// admits nothing else).

#include "backend/matmul_shape.h"
#include "ir/op_views.h"

namespace tandem::backend {

inline MatmulShape matmulShapeOf(const ir::Node& node) {
  const ir::MatmulView v(node);
  const ir::Shape &a = v.a()->type().shape, &c = v.c()->type().shape;
  MatmulShape s;
  s.m = c[c.size() - 2];
  s.n = c[c.size() - 1];
  s.k = v.trans_a() ? a[a.size() - 2] : a[a.size() - 1];
  s.batch = v.c()->type().numElements() / (s.m * s.n);
  s.trans_a = v.trans_a();
  s.trans_b = v.trans_b();
  const bool batched = c.size() > 2;
  s.a_broadcast = batched && v.a()->type().rank() == 2;
  s.b_broadcast = batched && v.b()->type().rank() == 2;
  return s;
}

}  // namespace tandem::backend

// scale, add_bcast, mul_bcast, concat_axis, slice_axis and slice_axis_backward on CUDA,
// and compare, where, mod and mod_backward (select_at.h).
// Without a GPU: the per-element math the kernels run (broadcast_math.h over
// broadcast_index.h), compiled here, against the CPU kernels (the own scale loop, oneDNN's
// binary, the own copy loops) bit for bit: each result element is one float operation (or
// a copy) rounded once, the same on both. (reduce_sum/reduce_mean run rows.cu's axis sum
// and spread, tested against the CPU core by
// CudaTransformerMath.AxisSumsMatchTheCpuCoreAndSpreadsAreItsBits.) With a GPU: every op
// through the CUDA kernel table against the CPU backend.

#include "backend/cuda/broadcast_math.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/axis_split.h"
#include "backend/broadcast_index.h"
#include "backend/cuda/select_at.h"
#include "backend/select_node.h"
#include "gtest/gtest.h"
#include "tests/cuda/cuda_test_util.h"

namespace tandem::testing {
namespace {

namespace cu = backend::cuda;
using ir::Op;

/// Random values in [-4, 4) in every operand, and signed zeros at the front.
void fillOperands(SingleOp& op, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-4.0f, 4.0f);
  for (size_t k = 0; k < op.node().numOperands(); ++k) {
    Buffer& b = op.in(k);
    for (int64_t i = 0; i < b.size(); ++i) {
      const float v = i == 0 ? -0.0f : i == 1 ? 0.0f : d(rng);
      if (b.type().dtype == ir::DType::kBF16)
        b.bf16()[i] = v;
      else
        b.f32()[i] = v;
    }
  }
}

/// The data of a buffer as the CUDA math reads it: float, or uint16_t bits of bf16.
const void* raw(Buffer& b) { return b.view().data; }

/// Runs `op` on the CPU, and `math(mine, i)` for every element of a copy of result 0;
/// expects the same bits (a NaN for a NaN).
template <typename Math>
void expectMathIsTheCpuKernel(SingleOp& op, Math math) {
  op.run();
  Buffer mine(op.out(0).type());
  for (int64_t i = 0; i < mine.size(); ++i) math(mine, i);
  const size_t w = static_cast<size_t>(ir::dtypeBytes(mine.type().dtype));
  for (int64_t i = 0; i < mine.size(); ++i) {
    const char* a = static_cast<const char*>(mine.view().data) + static_cast<size_t>(i) * w;
    const char* b = static_cast<const char*>(op.out(0).view().data) + static_cast<size_t>(i) * w;
    if (std::memcmp(a, b, w) != 0 && !(std::isnan(mine.at(i)) && std::isnan(op.out(0).at(i)))) {
      ADD_FAILURE() << op.node().describe() << ": element " << i << " is " << mine.at(i)
                    << ", the CPU's " << op.out(0).at(i) << " (of " << mine.size() << ")";
      return;
    }
  }
}

/// Calls f with a typed pointer to b's data: float* or uint16_t* (bf16 bits).
template <typename F>
void typed(Buffer& b, F f) {
  if (b.type().dtype == ir::DType::kBF16)
    f(reinterpret_cast<uint16_t*>(b.view().data));
  else
    f(b.f32());
}

TEST(CudaAxisMath, ScaleIsTheCpuKernel) {
  std::mt19937 rng(1);
  for (ir::DType t : {ir::DType::kF32, ir::DType::kBF16}) {
    SCOPED_TRACE(ir::dtypeName(t));
    SingleOp op(Op::kScale, {ir::TensorType{t, {97}}}, {{"factor", 1 / std::sqrt(8.0)}});
    fillOperands(op, rng);
    const auto factor = static_cast<float>(1 / std::sqrt(8.0));
    expectMathIsTheCpuKernel(op, [&](Buffer& y, int64_t i) {
      typed(op.in(0),
            [&](auto* x) { typed(y, [&](auto* out) { cu::scaleAt(x, out, factor, i); }); });
    });
  }
}

TEST(CudaAxisMath, BroadcastAddAndMulAreTheCpuKernel) {
  struct Case {
    ir::TensorType a, b;
  };
  const std::vector<Case> cases = {
      {f32({2, 3, 4}), f32({1, 3, 4})},   // oneDNN's binary, b broadcast
      {f32({4}), f32({2, 3, 4})},         // a broadcast: the operands swap for oneDNN
      {f32({3, 1}), f32({1, 4})},         // both broadcast: the own loop
      {bf16({2, 5, 8}), f32({1, 5, 8})},  // bf16 activations, an f32 master weight
      {bf16({4, 1, 6}), bf16({5, 1})},    // bf16, both broadcast
      {bf16({3, 7}), bf16({3, 7})},       // same shapes
  };
  std::mt19937 rng(2);
  for (bool mul : {false, true})
    for (const Case& c : cases) {
      SingleOp op(mul ? Op::kMulBcast : Op::kAddBcast, {c.a, c.b});
      SCOPED_TRACE(op.node().describe());
      fillOperands(op, rng);
      const ir::Shape& y = op.node().result()->type().shape;
      auto ma = backend::broadcastMap(c.a.shape, y, "a");
      auto mb = backend::broadcastMap(c.b.shape, y, "b");
      ASSERT_TRUE(ma.ok() && mb.ok());
      expectMathIsTheCpuKernel(op, [&](Buffer& out, int64_t i) {
        typed(op.in(0), [&](auto* a) {
          typed(op.in(1), [&](auto* b) {
            typed(out, [&](auto* o) { cu::broadcastBinaryAt(a, b, o, *ma, *mb, mul, i); });
          });
        });
      });
    }
}

TEST(CudaAxisMath, ConcatIsTheCpuKernel) {
  struct Case {
    std::vector<ir::TensorType> xs;
    int64_t axis;
  };
  const std::vector<Case> cases = {
      {{f32({1, 1, 8}), f32({3, 4, 8})}, 1},   // a class token before patches
      {{f32({1, 1, 8}), bf16({3, 4, 8})}, 1},  // an f32 one before bf16 tokens
      {{f32({2, 3, 4}), f32({2, 1, 4}), f32({2, 2, 4})}, -2},
      {{bf16({2, 2}), bf16({2, 1}), bf16({1, 3})}, -1},  // repeated on the outer axis
      {{f32({3, 1, 2}), f32({3, 4, 1})}, 1},             // repeated on the inner axis
      {{f32({1, 5}), f32({3, 5})}, 0},
  };
  std::mt19937 rng(3);
  for (const Case& c : cases) {
    SingleOp op(Op::kConcatAxis, c.xs, {{"axis", c.axis}});
    SCOPED_TRACE(op.node().describe());
    fillOperands(op, rng);
    const ir::TensorType& y = op.node().result()->type();
    auto out = backend::splitAtAxis(y.shape, c.axis, "y", "concat");
    ASSERT_TRUE(out.ok());
    const size_t axis = static_cast<size_t>(c.axis < 0 ? c.axis + y.rank() : c.axis);
    expectMathIsTheCpuKernel(op, [&](Buffer& res, int64_t i) {
      // Element i of the result belongs to one operand's block: find it, and its t.
      const int64_t a = i / out->inner % out->axis, o = i / (out->inner * out->axis);
      int64_t start = 0;
      for (size_t k = 0; k < c.xs.size(); ++k) {
        const int64_t len = c.xs[k].shape[axis];
        if (a < start + len) {
          ir::Shape block = y.shape;
          block[axis] = len;
          auto map = backend::broadcastMap(c.xs[k].shape, block, "x");
          ASSERT_TRUE(map.ok());
          const int64_t t = (o * len + (a - start)) * out->inner + i % out->inner;
          typed(op.in(k), [&](auto* x) {
            typed(res, [&](auto* r) {
              cu::concatPartAt(x, r, *map, len, out->inner, out->axis, start, t);
            });
          });
          return;
        }
        start += len;
      }
    });
  }
}

TEST(CudaAxisMath, SliceAndItsBackwardAreTheCpuKernels) {
  std::mt19937 rng(4);
  for (ir::DType t : {ir::DType::kF32, ir::DType::kBF16}) {
    SCOPED_TRACE(ir::dtypeName(t));
    const ir::TensorType whole{t, {3, 5, 8}};
    SingleOp fwd(Op::kSliceAxis, {whole},
                 {{"axis", int64_t{1}}, {"start", int64_t{1}}, {"end", int64_t{4}}});
    fillOperands(fwd, rng);
    expectMathIsTheCpuKernel(fwd, [&](Buffer& y, int64_t i) {
      typed(fwd.in(0), [&](auto* x) {
        using T = std::remove_pointer_t<decltype(x)>;
        cu::sliceAt(x, static_cast<T*>(y.view().data), 3, 8, 5, 1, i);
      });
    });
    SingleOp bwd(Op::kSliceAxisBackward, {ir::TensorType{t, {3, 3, 8}}, whole},
                 {{"axis", int64_t{-2}}, {"start", int64_t{2}}});
    fillOperands(bwd, rng);
    expectMathIsTheCpuKernel(bwd, [&](Buffer& dx, int64_t i) {
      typed(bwd.in(0), [&](auto* dy) {
        using T = std::remove_pointer_t<decltype(dy)>;
        cu::sliceBackwardAt(dy, static_cast<T*>(dx.view().data), 3, 8, 5, 2, i);
      });
    });
  }
}

// ---- on a GPU ----------------------------------------------------------------------------

// compare, where, mod and mod_backward: select_at.h's element against the CPU's loop
// (both over select_math.h), f32 and bf16 operands side by side, every operand broadcast
// somewhere, a NaN, infinities and zeros among the values.
TEST(CudaAxisMath, CompareWhereAndModAreTheCpuKernels) {
  using Attrs = SingleOp::Attrs;
  struct Case {
    Op op;
    std::vector<ir::TensorType> types;
    Attrs attrs;
    cu::SelectKind kind;
  };
  std::vector<Case> cases;
  for (const char* kind : {"eq", "ne", "lt", "le", "gt", "ge"})
    cases.push_back({Op::kCompare,
                     {f32({2, 3, 4}), bf16({3, 1})},
                     {{"kind", ir::EnumWord{kind}}},
                     cu::SelectKind::kBinary});
  for (bool fmod : {false, true}) {
    cases.push_back(
        {Op::kMod, {f32({3, 1}), f32({1, 4})}, {{"fmod", fmod}}, cu::SelectKind::kBinary});
    cases.push_back({Op::kModBackward,
                     {bf16({2, 3, 4}), f32({3, 4}), f32({4})},
                     {{"fmod", fmod}},
                     cu::SelectKind::kModBackward});
  }
  cases.push_back(
      {Op::kWhere, {f32({3, 1}), bf16({2, 3, 4}), f32({4})}, {}, cu::SelectKind::kWhere});
  std::mt19937 rng(6);
  for (const Case& c : cases) {
    SingleOp op(c.op, c.types, c.attrs);
    SCOPED_TRACE(op.node().describe());
    fillOperands(op, rng);
    for (size_t k = 0; k < c.types.size(); ++k) {  // specials at the front of each operand
      Buffer& b = op.in(k);
      const float specials[] = {NAN, INFINITY, 0.0f};
      for (int64_t i = 0; i < std::min<int64_t>(3, b.size()); ++i) {
        const float v = specials[(size_t(i) + k) % 3];
        if (b.type().dtype == ir::DType::kBF16)
          b.bf16()[i] = v;
        else
          b.f32()[i] = v;
      }
    }
    cu::SelectOperands ops;
    ops.kind = c.kind;
    ops.count = int32_t(c.types.size());
    if (c.kind == cu::SelectKind::kBinary) ops.fn = backend::binaryFnOf(op.node());
    if (c.kind == cu::SelectKind::kModBackward) ops.fmod = ir::attr::fmod(op.node());
    const ir::Shape& y = op.node().result()->type().shape;
    for (int32_t k = 0; k < ops.count; ++k) {
      auto m = backend::broadcastMap(c.types[size_t(k)].shape, y, "operand");
      ASSERT_TRUE(m.ok());
      ops.map[k] = *m;
      ops.bf16[k] = c.types[size_t(k)].dtype == ir::DType::kBF16;
      ops.data[k] = raw(op.in(size_t(k)));
    }
    expectMathIsTheCpuKernel(op, [&](Buffer& out, int64_t i) {
      typed(out, [&](auto* o) { cu::store(o, i, cu::selectAt(ops, i)); });
    });
  }
}

TEST(CudaAxisKernels, EveryOpMatchesTheCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  using Attrs = SingleOp::Attrs;
  struct Case {
    Op op;
    std::vector<ir::TensorType> types;
    Attrs attrs;
  };
  const std::vector<Case> cases = {
      {Op::kScale, {bf16({4, 37, 37})}, {{"factor", 0.25}}},
      {Op::kAddBcast, {bf16({8, 50, 64}), f32({1, 50, 64})}, {}},
      {Op::kMulBcast, {f32({8, 1, 64}), f32({50, 1})}, {}},
      {Op::kReduceSum, {f32({8, 50, 64})}, {{"axis", int64_t{0}}, {"keepdim", true}}},
      {Op::kReduceMean, {bf16({8, 50, 64})}, {{"axis", int64_t{1}}}},
      {Op::kReduceMeanBackward, {bf16({8, 64}), bf16({8, 50, 64})}, {{"axis", int64_t{1}}}},
      {Op::kConcatAxis, {f32({1, 1, 64}), bf16({8, 49, 64})}, {{"axis", int64_t{1}}}},
      {Op::kSliceAxis,
       {bf16({8, 50, 64})},
       {{"axis", int64_t{1}}, {"start", int64_t{0}}, {"end", int64_t{1}}}},
      {Op::kSliceAxisBackward,
       {bf16({8, 1, 64}), bf16({8, 50, 64})},
       {{"axis", int64_t{1}}, {"start", int64_t{0}}}},
      {Op::kCompare, {f32({8, 50, 64}), bf16({50, 1})}, {{"kind", ir::EnumWord{"le"}}}},
      {Op::kWhere, {f32({8, 50, 1}), bf16({8, 50, 64}), f32({64})}, {}},
      {Op::kMod, {f32({8, 50, 64}), f32({64})}, {{"fmod", false}}},
      {Op::kModBackward, {f32({8, 50, 64}), f32({8, 50, 64}), f32({64})}, {{"fmod", true}}},
  };
  for (const Case& c : cases) {
    SingleOp op(c.op, c.types, c.attrs);
    SCOPED_TRACE(op.node().describe());
    fillFinite(op, rng);
    // Sums over 8 or 50 terms add in another order on the GPU (rows.cu: one thread per
    // output in order; oneDNN's reduction vectorized): 1e-6 of scale in f32, and where that
    // lands on the other side of a bf16 rounding, one bf16 step (2^-8); the rest are exact.
    bool low = false;
    for (const ir::TensorType& t : c.types) low = low || t.dtype == ir::DType::kBF16;
    expectCudaMatchesCpu(op, low ? 1.0 / 256 : 1e-6);
  }
}

}  // namespace
}  // namespace tandem::testing

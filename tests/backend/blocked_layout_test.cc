// The CPU kernels that take channel-blocked activations (backend/cpu/layout_plan.h) give,
// in nChw16c, what they give in plain NCHW: each kernel runs once on plain tensors and
// once on the same values blocked, and the results, unblocked, must agree. The batch norm
// kernels also with bf16 activations (blocked: nChw16c of bf16 elements).

#include <cstring>
#include <random>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/layout_plan.h"
#include "backend/cpu/target_info.h"
#include "gtest/gtest.h"
#include "kernel_test_util.h"
#include "passes/assign_layouts.h"
#include "tests/test_util.h"

namespace tandem::testing {
namespace {

using backend::cpu::kChannelBlock;

/// Index of (n, c, p) (p: pixel) in NCHW and in nChw16c.
int64_t plainAt(const ir::Shape& s, int64_t n, int64_t c, int64_t p) {
  return (n * s[1] + c) * s[2] * s[3] + p;
}
int64_t blockedAt(const ir::Shape& s, int64_t n, int64_t c, int64_t p) {
  const int64_t hw = s[2] * s[3], cb = s[1] / kChannelBlock;
  return ((n * cb + c / kChannelBlock) * hw + p) * kChannelBlock + c % kChannelBlock;
}
/// Copies the elements of a tensor of type t (any dtype) between layouts: to blocked when
/// `to_blocked`, else back.
void convert(const ir::TensorType& t, Buffer& from, Buffer& to, bool to_blocked) {
  const ir::Shape& s = t.shape;
  const size_t size = static_cast<size_t>(ir::dtypeBytes(t.dtype));
  const char* src = static_cast<const char*>(from.view().data);
  char* dst = static_cast<char*>(to.view().data);
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t c = 0; c < s[1]; ++c)
      for (int64_t p = 0; p < s[2] * s[3]; ++p) {
        const int64_t a = plainAt(s, n, c, p), b = blockedAt(s, n, c, p);
        const int64_t f = to_blocked ? a : b, d = to_blocked ? b : a;
        std::memcpy(dst + d * size, src + f * size, size);
      }
}

void copy(Buffer& from, Buffer& to) {
  std::memcpy(to.view().data, from.view().data, static_cast<size_t>(from.type().bytes()));
}

/// Uniform values in [lo, hi) in an f32 or bf16 buffer.
void fill(Buffer& b, std::mt19937& rng, float lo = -1, float hi = 1) {
  if (b.type().dtype != ir::DType::kBF16) return b.fillUniform(rng, lo, hi);
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t i = 0; i < b.size(); ++i) b.bf16()[i] = d(rng);
}

bool blockable(const ir::TensorType& t) {
  return t.shape.size() == 4 && t.shape[1] % kChannelBlock == 0;
}

/// Runs `op`'s kernel plain and with its activations blocked (the 4-D operands and results
/// that are not filters: `filter_operand`, `filter_result` say which are), and compares
/// every result. Relative tolerance `tol` (sums added in another order round differently).
void expectSameInBothLayouts(SingleOp& op, double tol, int filter_operand = -1,
                             int filter_result = -1, std::vector<int> plain_operands = {}) {
  op.run();
  std::vector<Buffer> plain_out;
  for (size_t r = 0; r < op.node().numResults(); ++r) {
    plain_out.emplace_back(op.out(r).type());
    copy(op.out(r), plain_out.back());
  }
  // Same node, blocked: its activations (4-D, 16-channel multiples, not filters, not
  // listed in `plain_operands`).
  absl::flat_hash_set<const ir::Value*> blocked;
  std::vector<bool> in_blocked, out_blocked;
  for (size_t i = 0; i < op.node().numOperands(); ++i) {
    const ir::Value* v = op.node().operand(i);
    in_blocked.push_back(blockable(v->type()) && int(i) != filter_operand &&
                         std::find(plain_operands.begin(), plain_operands.end(), int(i)) ==
                             plain_operands.end());
    if (in_blocked.back()) blocked.insert(v);
  }
  for (size_t r = 0; r < op.node().numResults(); ++r) {
    const ir::Value* v = op.node().result(r);
    out_blocked.push_back(blockable(v->type()) && int(r) != filter_result);
    if (out_blocked.back()) blocked.insert(v);
  }
  auto kernel = backend::cpu::makeKernel(op.node(), op.ctx(), &blocked);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  std::vector<Buffer> ins, outs;
  for (size_t i = 0; i < op.node().numOperands(); ++i) {
    const ir::TensorType& t = op.node().operand(i)->type();
    ins.emplace_back(t);
    if (in_blocked[i])
      convert(t, op.in(i), ins.back(), true);
    else
      copy(op.in(i), ins.back());
  }
  for (size_t r = 0; r < op.node().numResults(); ++r) outs.emplace_back(op.node().result(r)->type());
  std::vector<backend::TensorView> in, out;
  for (auto& b : ins) in.push_back(b.view());
  for (auto& b : outs) out.push_back(b.view());
  ASSERT_TRUE((*kernel)->runHere(in, out).ok());
  for (size_t r = 0; r < outs.size(); ++r) {
    const ir::TensorType& t = op.node().result(r)->type();
    Buffer got(t);
    if (out_blocked[r])
      convert(t, outs[r], got, false);
    else
      copy(outs[r], got);
    double scale = 1e-3, diff = 0;
    for (int64_t i = 0; i < t.numElements(); ++i)
      scale = std::max(scale, std::abs(plain_out[r].at(i))),
      diff = std::max(diff, std::abs(got.at(i) - plain_out[r].at(i)));
    EXPECT_LE(diff / scale, tol) << op.node().describe() << " result " << r;
  }
}

const ir::Shape kShape{3, 32, 5, 6};  // two channel blocks, an odd plane

std::vector<double> statsOf(Buffer& y) {
  const ir::Shape& s = y.type().shape;
  const int64_t c = s[1], hw = s[2] * s[3];
  std::vector<double> st(3 * c, 0.0);
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p) {
        const double v = y.at(plainAt(s, n, ch, p));
        st[ch] += 1, st[c + ch] += v, st[2 * c + ch] += v * v;
      }
  return st;
}

TEST(BlockedLayout, Conv2dStats) {
  std::mt19937 rng(1);
  for (int64_t cin : {1, 16}) {
    SingleOp op(ir::Op::kConv2dStats, {f32({3, cin, 7, 7}), f32({32, cin, 3, 3}), f32({32})},
                {{"stride", int64_t{1}}, {"pad", int64_t{1}}});
    for (size_t i = 0; i < 3; ++i) op.in(i).fillUniform(rng);
    expectSameInBothLayouts(op, 1e-5, /*filter_operand=*/1);
  }
}

TEST(BlockedLayout, ConvolutionPasses) {
  std::mt19937 rng(2);
  struct Geometry {
    int64_t n, c, hw, o, k, stride, pad;
  };
  // Direct (stride 2, a 1x1 shortcut) and Winograd (3x3 stride 1, 64 channels, 64 tiles).
  for (const Geometry& q : {Geometry{2, 32, 8, 16, 3, 2, 1}, Geometry{2, 32, 8, 16, 1, 2, 0},
                            Geometry{4, 64, 16, 64, 3, 1, 1},
                            Geometry{8, 512, 4, 512, 3, 1, 1}, Geometry{8, 256, 7, 512, 3, 2, 1}}) {
    const int64_t out = (q.hw + 2 * q.pad - q.k) / q.stride + 1;
    const ir::TensorType x = f32({q.n, q.c, q.hw, q.hw}), w = f32({q.o, q.c, q.k, q.k}),
                         y = f32({q.n, q.o, out, out});
    const SingleOp::Attrs a = {{"stride", q.stride}, {"pad", q.pad}};
    SingleOp fwd(ir::Op::kConv2d, {x, w}, a);
    SingleOp data(ir::Op::kConv2dBackwardData, {y, w, x}, a);
    SingleOp filter(ir::Op::kConv2dBackwardFilter, {y, x, w},
                    {{"stride", q.stride}, {"pad", q.pad}, {"bias", true}});
    for (SingleOp* op : {&fwd, &data, &filter})
      for (size_t i = 0; i < op->node().numOperands(); ++i) op->in(i).fillUniform(rng);
    expectSameInBothLayouts(fwd, 1e-5, /*filter_operand=*/1);
    expectSameInBothLayouts(data, 1e-5, /*filter_operand=*/1);
    expectSameInBothLayouts(filter, 1e-5, /*filter_operand=*/2, /*filter_result=*/0);
    // Mixed: the gradient arrives plain, the other activation is blocked.
    expectSameInBothLayouts(data, 1e-5, 1, -1, {0});
    expectSameInBothLayouts(filter, 1e-5, 2, 0, {0});
    expectSameInBothLayouts(fwd, 1e-5, 1, 0);
  }
}

/// batch_norm_recompute with activations of type act(shape) (f32 or bf16).
void expectRecomputeSameInBothLayouts(ir::TensorType (*act)(ir::Shape), std::mt19937& rng) {
  for (bool relu : {true, false}) {
    SingleOp op(ir::Op::kBatchNormRecompute,
                {act(kShape), {ir::DType::kF64, {3, kShape[1]}}, f32({kShape[1]}),
                 f32({kShape[1]})},
                {{"eps", 1e-5}, {"relu", relu}});
    fill(op.in(0), rng, -1, 2);
    std::vector<double> st = statsOf(op.in(0));
    std::memcpy(op.in(1).view().data, st.data(), st.size() * sizeof(double));
    op.in(2).fillUniform(rng, 0.5, 1.5);
    op.in(3).fillUniform(rng);
    expectSameInBothLayouts(op, 0);  // elementwise: bit for bit
  }
}

TEST(BlockedLayout, BatchNormRecompute) {
  std::mt19937 rng(3);
  expectRecomputeSameInBothLayouts(f32, rng);
}

TEST(BlockedLayout, Bf16BatchNormRecompute) {
  TANDEM_SKIP_WITHOUT_BF16();
  std::mt19937 rng(3);
  expectRecomputeSameInBothLayouts(bf16, rng);
}

/// batch_norm_backward_reduce and batch_norm_backward_apply with activations of type
/// act(shape) (f32 or bf16), with and without relu and residual.
void expectBackwardSameInBothLayouts(ir::TensorType (*act)(ir::Shape), const ir::Shape& shape,
                                     std::mt19937& rng) {
  const int64_t c = shape[1];
  const ir::TensorType y = act(shape), ch = f32({c});
  for (bool relu : {false, true}) {
    std::vector<ir::TensorType> reduce_in{y, y, ch, ch};
    if (relu) reduce_in.push_back(y);
    SingleOp reduce(ir::Op::kBatchNormBackwardReduce, reduce_in);
    for (size_t i = 0; i < reduce_in.size(); ++i) fill(reduce.in(i), rng);
    expectSameInBothLayouts(reduce, 0);  // the same additions in the same order

    for (bool residual : {false, true}) {
      std::vector<ir::TensorType> apply_in{y, y, ch, ch, ch, {ir::DType::kF64, {2, c}},
                                           {ir::DType::kF64, {3, c}}};
      if (relu) apply_in.push_back(y);
      SingleOp apply(ir::Op::kBatchNormBackwardApply, apply_in, {{"residual", residual}});
      for (size_t i = 0; i < apply_in.size(); ++i)
        if (apply_in[i].dtype != ir::DType::kF64) fill(apply.in(i), rng);
      auto* sums = static_cast<double*>(apply.in(5).view().data);
      auto* stats = static_cast<double*>(apply.in(6).view().data);
      for (int64_t k = 0; k < c; ++k) {
        sums[k] = 0.5 * k, sums[c + k] = 1.0 - 0.1 * k;
        stats[k] = double(shape[0] * shape[2] * shape[3]);
      }
      expectSameInBothLayouts(apply, 0);  // elementwise with per-channel coefficients
    }
  }
}

TEST(BlockedLayout, BatchNormBackward) {
  std::mt19937 rng(4);
  for (const ir::Shape& shape : {kShape, ir::Shape{8, 512, 4, 4}, ir::Shape{4, 64, 28, 28}})
    expectBackwardSameInBothLayouts(f32, shape, rng);
}

TEST(BlockedLayout, Bf16BatchNormBackward) {
  TANDEM_SKIP_WITHOUT_BF16();
  std::mt19937 rng(4);
  for (const ir::Shape& shape : {kShape, ir::Shape{4, 64, 9, 9}})
    expectBackwardSameInBothLayouts(bf16, shape, rng);
}

TEST(BlockedLayout, PlanKeepsGraphBoundariesPlain) {
  // A graph input, a value read by relu and a graph output stay plain; a conv -> conv
  // chain between them, with 16 channels, is blocked.
  ir::Module m("t");
  ir::Graph* g = *m.addGraph("g");
  auto in = [&](const char* name, ir::TensorType t) {
    return (*g->create({.op = ir::Op::kInput, .names = {name}, .declared_types = {t}}))->result();
  };
  ir::Value* x = in("x", f32({2, 16, 8, 8}));
  ir::Value* w = in("w", f32({16, 16, 3, 3}));
  const std::vector<std::pair<std::string, ir::AttrValue>> a = {{"stride", int64_t{1}},
                                                                 {"pad", int64_t{1}}};
  ir::Value* y1 = (*g->create({.op = ir::Op::kConv2d, .operands = {x, w}, .attrs = a}))->result();
  ir::Value* y2 = (*g->create({.op = ir::Op::kConv2d, .operands = {y1, w}, .attrs = a}))->result();
  ir::Value* r = (*g->create({.op = ir::Op::kRelu, .operands = {y2}}))->result();
  ir::Value* y3 = (*g->create({.op = ir::Op::kConv2d, .operands = {r, w}, .attrs = a}))->result();
  g->setOutputs({y3});
  auto blocked = passes::valuesKeptUnder(*g, backend::cpu::targetInfo());
  EXPECT_FALSE(blocked.contains(x));   // graph input
  EXPECT_FALSE(blocked.contains(w));   // a filter
  EXPECT_TRUE(blocked.contains(y1));   // conv -> conv
  EXPECT_FALSE(blocked.contains(y2));  // read by relu
  EXPECT_FALSE(blocked.contains(r));   // relu's output
  EXPECT_FALSE(blocked.contains(y3));  // graph output
}

}  // namespace
}  // namespace tandem::testing

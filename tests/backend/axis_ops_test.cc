// scale, add_bcast, mul_bcast, reduce_sum, reduce_mean, concat_axis and slice_axis through
// their kernel slots and gradient rules (GraphEval: the rule's nodes run on the CPU
// kernels too): against PyTorch 1.13 (tests/data/gen_axis_op_refs.py, and the reduction
// cases of gen_transformer_refs.py), against central differences of the forward kernels,
// in bf16, and bad operands as errors naming the node and the operand.

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/bf16.h"
#include "graph_eval.h"
#include "gtest/gtest.h"
#include "ir/op_views.h"
#include "kernel_test_util.h"
#include "tests/cores/ref_case.h"

namespace tandem::testing {
namespace {

ir::Shape shapeOf(const RefTensor& t) { return ir::Shape(t.shape.begin(), t.shape.end()); }

/// A forward node over inputs, an input dy of its result's type, and the gradient rule's
/// nodes, all on the CPU kernels.
struct OpGraph {
  GraphEval e;
  std::vector<ir::Value*> xs;
  ir::Value* dy = nullptr;
  ir::Node* op = nullptr;
  std::vector<ir::Value*> grads;

  /// `make` builds the node's spec from the inputs.
  template <typename Make>
  OpGraph(const std::vector<ir::TensorType>& types, Make make) {
    for (size_t i = 0; i < types.size(); ++i)
      xs.push_back(e.input(absl::StrCat("x", i), types[i]));
    auto n = e.add(make(xs));
    EXPECT_TRUE(n.ok()) << n.status();
    if (!n.ok()) return;
    op = *n;
    dy = e.input("dy", op->result()->type());
    grads = e.grad(*op, dy);
  }
};

ir::NodeSpec specOf(const RefCase& c, const std::string& kind, const std::vector<ir::Value*>& xs) {
  if (kind == "scale") return ir::ScaleArgs{.x = xs[0], .factor = c.num("factor")}.spec();
  if (kind == "binary")
    return c.flag("mul") ? ir::MulBcastArgs{.a = xs[0], .b = xs[1]}.spec()
                         : ir::AddBcastArgs{.a = xs[0], .b = xs[1]}.spec();
  if (kind == "concat") return ir::ConcatAxisArgs{.xs = xs, .axis = c.integer("axis")}.spec();
  if (kind == "slice")
    return ir::SliceAxisArgs{
        .x = xs[0], .axis = c.integer("axis"), .start = c.integer("start"), .end = c.integer("end")}
        .spec();
  // the reduction cases of gen_transformer_refs.py
  return c.text("kind") == "sum" ? ir::ReduceSumArgs{.x = xs[0], .axis = c.integer("axis")}.spec()
                                 : ir::ReduceMeanArgs{.x = xs[0], .axis = c.integer("axis")}.spec();
}

// The forward results are one rounding of the same float operation (a product, a sum of
// two, a copy), so they match PyTorch to the bit or nearly; a gradient that sums over
// repeated axes (at most 50 terms here) adds in another order than PyTorch: a few f32
// ulps of the tensor's scale. 1e-6 of scale bounds both.
TEST(AxisOps, ForwardAndGradientRulesMatchPyTorch) {
  struct Ref {
    const char* name;
    const char* dir;
    const char* kind;
    std::vector<std::string> inputs, grads;
  };
  const std::vector<Ref> refs = {
      {"scale_attention", "../axis_op_refs/", "scale", {"x"}, {"dx"}},
      {"scale_negative", "../axis_op_refs/", "scale", {"x"}, {"dx"}},
      {"add_bcast_position", "../axis_op_refs/", "binary", {"a", "b"}, {"da", "db"}},
      {"add_bcast_bias", "../axis_op_refs/", "binary", {"a", "b"}, {"da", "db"}},
      {"add_bcast_both", "../axis_op_refs/", "binary", {"a", "b"}, {"da", "db"}},
      {"mul_bcast_same", "../axis_op_refs/", "binary", {"a", "b"}, {"da", "db"}},
      {"mul_bcast_rows", "../axis_op_refs/", "binary", {"a", "b"}, {"da", "db"}},
      {"mul_bcast_both", "../axis_op_refs/", "binary", {"a", "b"}, {"da", "db"}},
      {"concat_axis_cls", "../axis_op_refs/", "concat", {"x0", "x1"}, {"dx0", "dx1"}},
      {"concat_axis_three", "../axis_op_refs/", "concat", {"x0", "x1", "x2"}, {"dx0", "dx1", "dx2"}},
      {"concat_axis_first", "../axis_op_refs/", "concat", {"x0", "x1"}, {"dx0", "dx1"}},
      {"slice_axis_cls", "../axis_op_refs/", "slice", {"x"}, {"dx"}},
      {"slice_axis_last", "../axis_op_refs/", "slice", {"x"}, {"dx"}},
      {"reduce_sum_middle", "", "reduce", {"x"}, {"dx"}},
      {"reduce_mean_tokens", "", "reduce", {"x"}, {"dx"}},
      {"reduce_sum_first", "", "reduce", {"x"}, {"dx"}},
      {"reduce_mean_last", "", "reduce", {"x"}, {"dx"}},
  };
  for (const Ref& r : refs) {
    SCOPED_TRACE(r.name);
    // RefCase::load reads tests/data/transformer_refs/<name>.ref; this file's own cases
    // are in the sibling folder axis_op_refs, which gen_transformer_refs.py (it clears its
    // folder) does not touch.
    auto loaded = RefCase::load(std::string(r.dir) + r.name);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    const RefCase& c = *loaded;
    std::vector<ir::TensorType> types;
    for (const std::string& in : r.inputs) types.push_back(f32Of(c.tensor(in).shape));
    OpGraph g(types, [&](const std::vector<ir::Value*>& xs) { return specOf(c, r.kind, xs); });
    ASSERT_NE(g.op, nullptr);
    EXPECT_EQ(g.op->result()->type().shape, shapeOf(c.tensor("y")));
    for (size_t i = 0; i < r.inputs.size(); ++i)
      fillFrom(g.e.buffer(g.xs[i]), c.tensor(r.inputs[i]).values);
    fillFrom(g.e.buffer(g.dy), c.tensor("dy").values);
    g.e.run();
    EXPECT_LE(relativeError(valuesOf(g.e.buffer(g.op->result())), c.tensor("y")), 1e-6) << "y";
    for (size_t i = 0; i < r.grads.size(); ++i) {
      ASSERT_NE(g.grads[i], nullptr) << r.grads[i];
      EXPECT_EQ(g.grads[i]->type(), g.xs[i]->type()) << r.grads[i];
      EXPECT_LE(relativeError(valuesOf(g.e.buffer(g.grads[i])), c.tensor(r.grads[i])), 1e-6)
          << r.grads[i];
    }
  }
}

struct FdCase {
  std::string what;
  std::vector<ir::TensorType> types;
  std::function<ir::NodeSpec(const std::vector<ir::Value*>&)> make;
};

std::vector<FdCase> fdCases() {
  using V = const std::vector<ir::Value*>&;
  return {
      {"scale",
       {f32Of({2, 3, 4})},
       [](V x) { return ir::ScaleArgs{.x = x[0], .factor = -0.375}.spec(); }},
      {"add_bcast [2,3,4] + [1,3,1]",
       {f32Of({2, 3, 4}), f32Of({1, 3, 1})},
       [](V x) { return ir::AddBcastArgs{.a = x[0], .b = x[1]}.spec(); }},
      {"add_bcast [3,1] + [4]",
       {f32Of({3, 1}), f32Of({4})},
       [](V x) { return ir::AddBcastArgs{.a = x[0], .b = x[1]}.spec(); }},
      {"mul_bcast [2,1,4] * [3,1]",
       {f32Of({2, 1, 4}), f32Of({3, 1})},
       [](V x) { return ir::MulBcastArgs{.a = x[0], .b = x[1]}.spec(); }},
      {"mul_bcast [4] * [2,3,4]",
       {f32Of({4}), f32Of({2, 3, 4})},
       [](V x) { return ir::MulBcastArgs{.a = x[0], .b = x[1]}.spec(); }},
      {"reduce_sum axis 1",
       {f32Of({2, 3, 4})},
       [](V x) { return ir::ReduceSumArgs{.x = x[0], .axis = 1}.spec(); }},
      {"reduce_sum axis 0 keepdim",
       {f32Of({3, 5})},
       [](V x) { return ir::ReduceSumArgs{.x = x[0], .axis = 0, .keepdim = true}.spec(); }},
      {"reduce_mean axis -1 keepdim",
       {f32Of({2, 3, 4})},
       [](V x) { return ir::ReduceMeanArgs{.x = x[0], .axis = -1, .keepdim = true}.spec(); }},
      {"concat_axis class token [1,1,4] + [2,3,4]",
       {f32Of({1, 1, 4}), f32Of({2, 3, 4})},
       [](V x) { return ir::ConcatAxisArgs{.xs = x, .axis = 1}.spec(); }},
      {"concat_axis last axis, [2,1] repeated",
       {f32Of({2, 2}), f32Of({2, 1}), f32Of({1, 3})},
       [](V x) { return ir::ConcatAxisArgs{.xs = x, .axis = -1}.spec(); }},
      {"slice_axis",
       {f32Of({2, 5, 3})},
       [](V x) { return ir::SliceAxisArgs{.x = x[0], .axis = 1, .start = 1, .end = 4}.spec(); }},
  };
}

// Every op here is linear in each operand (mul_bcast bilinear), so the central difference
// (f(x + h) - f(x - h)) / 2h of the objective <dy, f(x)> is exact in exact arithmetic for
// any h; it runs the f32 forward kernels, whose results err by one rounding (2^-24
// relative) per element, summed in double over at most 72 elements and divided by 2h = 1.
// Inputs and dy are multiples of 2^-4 in [-2, 2], so each result is exact in f32 but for
// the mean's division and the products: 1e-5 of max(1, |gradient|) bounds the rest.
TEST(AxisOps, GradientRulesMatchFiniteDifferences) {
  std::mt19937 rng(24);
  std::uniform_int_distribution<int> d(-32, 32);
  for (const FdCase& fc : fdCases()) {
    SCOPED_TRACE(fc.what);
    OpGraph g(fc.types, fc.make);
    ASSERT_NE(g.op, nullptr);
    for (ir::Value* x : g.xs) {
      Buffer& b = g.e.buffer(x);
      for (int64_t i = 0; i < b.size(); ++i) b.f32()[i] = static_cast<float>(d(rng)) / 16;
    }
    Buffer& dyb = g.e.buffer(g.dy);
    for (int64_t i = 0; i < dyb.size(); ++i) dyb.f32()[i] = static_cast<float>(d(rng)) / 16;
    g.e.run();
    std::vector<std::vector<float>> got;
    for (ir::Value* gr : g.grads) {
      ASSERT_NE(gr, nullptr);
      got.push_back(valuesOf(g.e.buffer(gr)));
    }
    auto objective = [&] {
      g.e.run();
      Buffer& y = g.e.buffer(g.op->result());
      double s = 0;
      for (int64_t i = 0; i < y.size(); ++i) s += double(dyb.f32()[i]) * y.f32()[i];
      return s;
    };
    constexpr float h = 0.5f;
    for (size_t k = 0; k < g.xs.size(); ++k) {
      Buffer& b = g.e.buffer(g.xs[k]);
      std::vector<double> want(static_cast<size_t>(b.size()));
      for (int64_t i = 0; i < b.size(); ++i) {
        const float keep = b.f32()[i];
        b.f32()[i] = keep + h;
        const double up = objective();
        b.f32()[i] = keep - h;
        const double down = objective();
        b.f32()[i] = keep;
        want[static_cast<size_t>(i)] = (up - down) / (2 * h);
      }
      EXPECT_LE(maxRelativeError(got[k].data(), want.data(), b.size()), 1e-5) << "operand " << k;
    }
  }
}

// bf16 results are computed in float and rounded once; an f32 operand beside a bf16 one
// (a master weight: a position embedding, a class token) is read as it is, not rounded
// first.
TEST(AxisOps, Bf16IsF32RoundedOnceAndMasterWeightsAreReadAsTheyAre) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-2, 2);
  auto fill = [&](Buffer& b) {
    for (int64_t i = 0; i < b.size(); ++i) {
      if (b.type().dtype == ir::DType::kBF16)
        b.bf16()[i] = d(rng);
      else
        b.f32()[i] = d(rng);
    }
  };
  {  // add_bcast bf16 [2,3,4] + f32 [1,3,4]
    SingleOp op(ir::Op::kAddBcast, {bf16({2, 3, 4}), f32({1, 3, 4})});
    ASSERT_EQ(op.node().result()->type(), bf16({2, 3, 4}));
    fill(op.in(0)), fill(op.in(1));
    op.run();
    for (int64_t i = 0; i < 24; ++i)
      ASSERT_EQ(op.out(0).bf16()[i].bits,
                backend::bf16(float(op.in(0).bf16()[i]) + op.in(1).f32()[i % 12]).bits)
          << i;
  }
  {  // mul_bcast, both operands broadcast (the own loop): bf16 [3,1] * f32 [1,4]
    SingleOp op(ir::Op::kMulBcast, {bf16({3, 1}), f32({1, 4})});
    fill(op.in(0)), fill(op.in(1));
    op.run();
    for (int64_t i = 0; i < 12; ++i)
      ASSERT_EQ(op.out(0).bf16()[i].bits,
                backend::bf16(float(op.in(0).bf16()[i / 4]) * op.in(1).f32()[i % 4]).bits)
          << i;
  }
  {  // scale bf16
    SingleOp op(ir::Op::kScale, {bf16({37})}, {{"factor", 0.125 * 3}});
    fill(op.in(0));
    op.run();
    for (int64_t i = 0; i < 37; ++i)
      ASSERT_EQ(op.out(0).bf16()[i].bits, backend::bf16(0.375f * float(op.in(0).bf16()[i])).bits);
  }
  {  // concat_axis: an f32 class token [1,1,4] before bf16 tokens [2,3,4]: bf16 [2,4,4]
    SingleOp op(ir::Op::kConcatAxis, {f32({1, 1, 4}), bf16({2, 3, 4})}, {{"axis", int64_t{1}}});
    ASSERT_EQ(op.node().result()->type(), bf16({2, 4, 4}));
    fill(op.in(0)), fill(op.in(1));
    op.run();
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t t = 0; t < 4; ++t)
        for (int64_t c = 0; c < 4; ++c) {
          const float want = t == 0 ? float(backend::bf16(op.in(0).f32()[c]))
                                    : float(op.in(1).bf16()[(n * 3 + t - 1) * 4 + c]);
          ASSERT_EQ(float(op.out(0).bf16()[(n * 4 + t) * 4 + c]), want) << n << t << c;
        }
  }
  {  // reduce_sum over bf16: accumulated in f32, rounded once
    SingleOp op(ir::Op::kReduceSum, {bf16({3, 8})}, {{"axis", int64_t{1}}});
    fill(op.in(0));
    op.run();
    for (int64_t r = 0; r < 3; ++r) {
      double exact = 0;
      for (int64_t j = 0; j < 8; ++j) exact += float(op.in(0).bf16()[r * 8 + j]);
      EXPECT_NEAR(float(op.out(0).bf16()[r]), exact, std::abs(exact) / 256 + 1e-6) << r;
    }
  }
}

// Issue 40: a device with one example of the batch reduces over an axis of size 1, which
// oneDNN's reduction primitive refuses (source and destination of one shape): the kernel
// copies (a mean divides by 1), NaN included, in f32 and bf16; a sum starts from +0 as
// PyTorch's does (torch.tensor([[-0.0]]).sum(1) is +0).
TEST(AxisOps, ReductionOverAnAxisOfSizeOneIsACopy) {
  for (ir::DType dtype : {ir::DType::kF32, ir::DType::kBF16})
    for (bool mean : {false, true})
      for (int64_t axis : {0, 1, 2}) {
        SCOPED_TRACE(absl::StrCat(ir::dtypeName(dtype), mean ? " mean" : " sum", " axis ", axis));
        ir::Shape shape = {3, 4, 5};
        shape[static_cast<size_t>(axis)] = 1;
        GraphEval e;
        ir::Value* x = e.input("x", ir::TensorType{dtype, shape});
        auto n = e.add(mean ? ir::ReduceMeanArgs{.x = x, .axis = axis}.spec()
                            : ir::ReduceSumArgs{.x = x, .axis = axis}.spec());
        ASSERT_TRUE(n.ok()) << n.status();
        Buffer& xb = e.buffer(x);
        const float special[] = {1.5f, -0.0f, std::nanf(""), -3.25f, 1e-40f, 0.0f};
        for (int64_t i = 0; i < xb.size(); ++i) {
          const float v = special[i % 6] * (i % 7 == 0 ? 1.0f : 1.0f + float(i) / 8);
          if (dtype == ir::DType::kF32)
            xb.f32()[i] = v;
          else
            xb.bf16()[i] = backend::bf16(v);
        }
        e.run();
        Buffer& yb = e.buffer((*n)->result());
        ASSERT_EQ(yb.size(), xb.size());
        for (int64_t i = 0; i < xb.size(); ++i) {
          const double want = xb.at(i) == 0 ? 0.0 : xb.at(i), got = yb.at(i);
          if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(got)) << i;
          } else {
            EXPECT_EQ(got, want) << i;
            EXPECT_EQ(std::signbit(got), std::signbit(want)) << i;
          }
        }
      }
}

// where's and mod's gradient rules through the CPU kernels, against the derivatives
// written out: where passes dy to a where cond holds and to b where not (a NaN dy on the
// other side stays out, as PyTorch's select does), each summed over its broadcast axes;
// mod passes dy to a and -dy * floor(a / b) (trunc with fmod) to b. cond and a comparison's
// operands get no gradient.
TEST(AxisOps, WhereAndModGradientRulesAreTheirDerivatives) {
  {
    GraphEval e;
    ir::Value* cond = e.input("cond", f32Of({3, 1}));
    ir::Value* a = e.input("a", f32Of({2, 3, 4}));
    ir::Value* b = e.input("b", f32Of({4}));
    auto n = e.add(ir::WhereArgs{.cond = cond, .a = a, .b = b}.spec());
    ASSERT_TRUE(n.ok()) << n.status();
    ir::Value* dy = e.input("dy", f32Of({2, 3, 4}));
    std::vector<ir::Value*> g = e.grad(**n, dy, {false, true, true});
    ASSERT_EQ(g.size(), 3u);
    EXPECT_EQ(g[0], nullptr);
    ASSERT_NE(g[1], nullptr);
    ASSERT_NE(g[2], nullptr);
    const float conds[] = {1.0f, 0.0f, std::nanf("")};  // NaN holds
    for (int i = 0; i < 3; ++i) e.buffer(cond).f32()[i] = conds[i];
    Buffer& dyb = e.buffer(dy);
    for (int64_t i = 0; i < 24; ++i) dyb.f32()[i] = float(i) / 8 - 1;
    dyb.f32()[5] = std::nanf("");  // row 1 (cond 0): reaches b only
    e.run();
    std::vector<double> da(24, 0.0), db(4, 0.0);
    for (int64_t i = 0; i < 24; ++i) {
      const int64_t row = (i / 4) % 3, col = i % 4;
      if (row != 1)
        da[size_t(i)] = dyb.f32()[i];
      else
        db[size_t(col)] += dyb.f32()[i];
    }
    for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(e.buffer(g[1]).f32()[i], da[size_t(i)]) << i;
    for (int64_t c = 0; c < 4; ++c) {
      if (c == 1)
        EXPECT_TRUE(std::isnan(e.buffer(g[2]).f32()[c]));
      else
        EXPECT_FLOAT_EQ(e.buffer(g[2]).f32()[c], float(db[size_t(c)])) << c;
    }
  }
  for (bool fmod : {false, true}) {
    SCOPED_TRACE(fmod ? "fmod" : "remainder");
    GraphEval e;
    ir::Value* a = e.input("a", f32Of({3, 4}));
    ir::Value* b = e.input("b", f32Of({4}));
    auto n = e.add(ir::ModArgs{.a = a, .b = b, .fmod = fmod}.spec());
    ASSERT_TRUE(n.ok()) << n.status();
    ir::Value* dy = e.input("dy", f32Of({3, 4}));
    std::vector<ir::Value*> g = e.grad(**n, dy);
    ASSERT_EQ(g.size(), 2u);
    const float as[] = {7.5f, -7.5f, 2.0f, -0.25f};
    const float bs[] = {2.0f, -3.0f, 0.5f, 4.0f};
    for (int64_t i = 0; i < 12; ++i) {
      e.buffer(a).f32()[i] = as[i % 4] * float(1 + i / 4);
      e.buffer(dy).f32()[i] = 1.0f + float(i) / 4;
    }
    for (int i = 0; i < 4; ++i) e.buffer(b).f32()[i] = bs[i];
    e.run();
    for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(e.buffer(g[0]).f32()[i], e.buffer(dy).f32()[i]) << i;
    for (int c = 0; c < 4; ++c) {
      double want = 0;
      for (int r = 0; r < 3; ++r) {
        const double q = double(e.buffer(a).f32()[r * 4 + c]) / bs[c];
        want -= e.buffer(dy).f32()[r * 4 + c] * (fmod ? std::trunc(q) : std::floor(q));
      }
      EXPECT_FLOAT_EQ(e.buffer(g[1]).f32()[c], float(want)) << c;
    }
  }
}

TEST(AxisOps, BadOperandsAreErrorsNamingTheNodeAndOperand) {
  struct Bad {
    std::vector<ir::TensorType> types;
    std::function<ir::NodeSpec(const std::vector<ir::Value*>&)> make;
    std::vector<std::string> wants;
  };
  using V = const std::vector<ir::Value*>&;
  const ir::TensorType i32{ir::DType::kI32, {2, 3}};
  const std::vector<Bad> bads = {
      {{f32Of({2, 3}), f32Of({4, 3})},
       [](V x) { return ir::AddBcastArgs{.a = x[0], .b = x[1]}.spec({.names = {"pos"}}); },
       {"%pos", "a (%x0: f32[2,3])", "b (%x1: f32[4,3])", "do not broadcast", "axis -2"}},
      {{f32Of({2, 3}), i32},
       [](V x) { return ir::MulBcastArgs{.a = x[0], .b = x[1]}.spec({.names = {"gate"}}); },
       {"%gate", "b (%x1: i32[2,3])", "f32 or bf16"}},
      {{f32Of({2, 3})},
       [](V x) { return ir::ReduceMeanArgs{.x = x[0], .axis = 2}.spec({.names = {"avg"}}); },
       {"%avg", "axis=2", "x (%x0: f32[2,3])"}},
      {{f32Of({2, 1, 4}), f32Of({3, 2, 4})},
       [](V x) { return ir::ConcatAxisArgs{.xs = x, .axis = 1}.spec({.names = {"tokens"}}); },
       {"%tokens", "xs (%x1: f32[3,2,4])", "has 3 on axis 0"}},
      {{f32Of({2, 1, 4}), f32Of({2, 4})},
       [](V x) { return ir::ConcatAxisArgs{.xs = x, .axis = 1}.spec({.names = {"tokens"}}); },
       {"%tokens", "xs (%x1: f32[2,4])", "rank 3"}},
      {{f32Of({2, 5, 4})},
       [](V x) {
         return ir::SliceAxisArgs{.x = x[0], .axis = 1, .start = 3, .end = 6}.spec(
             {.names = {"cls"}});
       },
       {"%cls", "start=3 end=6", "x (%x0: f32[2,5,4])", "size of axis 1"}},
      {{f32Of({2, 5, 4})},
       [](V x) {
         return ir::SliceAxisArgs{.x = x[0], .axis = -4, .start = 0, .end = 1}.spec(
             {.names = {"cls"}});
       },
       {"%cls", "axis=-4", "x (%x0: f32[2,5,4])"}},
      {{f32Of({2, 2, 4}), f32Of({2, 5, 4})},
       [](V x) {
         return ir::SliceAxisBackwardArgs{.dy = x[0], .x = x[1], .axis = 1, .start = 4}.spec(
             {.names = {"dcls"}});
       },
       {"%dcls", "dy (%x0: f32[2,2,4])", "x (%x1: f32[2,5,4])", "start=4"}},
      {{f32Of({2, 5}), f32Of({2, 5, 4})},
       [](V x) {
         return ir::ReduceSumBackwardArgs{.dy = x[0], .x = x[1], .axis = 1}.spec(
             {.names = {"dsum"}});
       },
       {"%dsum", "dy (%x0: f32[2,5])", "must be f32[2,4]"}},
  };
  for (const Bad& b : bads) {
    GraphEval e;
    std::vector<ir::Value*> xs;
    for (size_t i = 0; i < b.types.size(); ++i)
      xs.push_back(e.input(absl::StrCat("x", i), b.types[i]));
    auto n = e.add(b.make(xs));
    ASSERT_FALSE(n.ok()) << b.wants[0];
    const std::string err(n.status().message());
    for (const std::string& want : b.wants)
      EXPECT_NE(err.find(want), std::string::npos) << err << "\nlacks: " << want;
  }
}

}  // namespace
}  // namespace tandem::testing

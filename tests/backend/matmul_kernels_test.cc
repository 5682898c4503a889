// matmul, reshape and transpose: their kernels and their gradient rules together. A small
// evaluator runs a graph node by node on CPU kernels; a matmul's gradient is the nodes its
// rule emits (matmul again, with reshapes and transposes for a shared operand), run the
// same way. Oracles: PyTorch 1.13's forward and autograd (tests/data/transformer_refs,
// the cases the matmul core is tested on), and central differences of a double forward.

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "graph_eval.h"
#include "gtest/gtest.h"
#include "ir/grad.h"
#include "ir/op_views.h"
#include "kernel_test_util.h"
#include "tests/cores/ref_case.h"

namespace tandem::testing {
namespace {

// ---- against PyTorch ------------------------------------------------------------------

// The f32 reference cases without bias or scale (the op has neither; the core's tests
// cover the others). A shared operand is stored [1, rows, cols] in the case: the op takes it as a
// plain matrix. Tolerance: the core tests' kF32Sum (f32 sums of at most 64 terms in
// another order than PyTorch's: 64 * 2^-24 of the scale).
TEST(Matmul, ForwardAndGradientRuleMatchPyTorch) {
  int checked = 0;
  for (const char* name :
       {"matmul_plain", "matmul_trans_a", "matmul_batched_trans_both", "matmul_shared_b_trans_b"}) {
    SCOPED_TRACE(name);
    auto loaded = RefCase::load(name);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    const RefCase& c = *loaded;
    if (c.flag("bias") || c.num("scale") != 1.0 || c.flag("bf16_inputs")) continue;
    auto shapeOf = [&](const char* t, bool shared) {
      std::vector<int64_t> s = c.tensor(t).shape;
      if (shared || (s.size() == 3 && s[0] == 1 && c.integer("batch") == 1)) s.erase(s.begin());
      return s;
    };
    GraphEval e;
    ir::Value* a = e.input("a", f32Of(shapeOf("a", c.flag("a_broadcast"))));
    ir::Value* b = e.input("b", f32Of(shapeOf("b", c.flag("b_broadcast"))));
    auto mm = e.add(
        ir::MatmulArgs{.a = a, .b = b, .trans_a = c.flag("trans_a"), .trans_b = c.flag("trans_b")}
            .spec({.names = {"c"}}));
    ASSERT_TRUE(mm.ok()) << mm.status();
    ir::Value* dc = e.input("dc", (*mm)->result()->type());
    std::vector<ir::Value*> g = e.grad(**mm, dc);
    fillFrom(e.buffer(a), c.tensor("a").values);
    fillFrom(e.buffer(b), c.tensor("b").values);
    fillFrom(e.buffer(dc), c.tensor("dc").values);
    e.run();
    EXPECT_LE(relativeError(valuesOf(e.buffer((*mm)->result())), c.tensor("c")), 4e-6) << "c";
    EXPECT_LE(relativeError(valuesOf(e.buffer(g[0])), c.tensor("da")), 4e-6) << "da";
    EXPECT_LE(relativeError(valuesOf(e.buffer(g[1])), c.tensor("db")), 4e-6) << "db";
    ++checked;
  }
  EXPECT_EQ(checked, 4);  // none of the cases above may be skipped
}

// ---- finite differences -----------------------------------------------------------------

struct Case {
  std::vector<int64_t> batch;  // leading axes
  bool trans_a, trans_b, a_shared, b_shared;
};

/// op(a) op(b) in double, the layout the op's doc gives.
std::vector<double> naiveMatmul(const Case& k, const std::vector<double>& a,
                                const std::vector<double>& b, int64_t m, int64_t n, int64_t kk,
                                int64_t batch) {
  std::vector<double> c(static_cast<size_t>(batch * m * n), 0.0);
  for (int64_t t = 0; t < batch; ++t) {
    const int64_t ao = k.a_shared ? 0 : t * m * kk, bo = k.b_shared ? 0 : t * kk * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t l = 0; l < kk; ++l) {
          const double av = a[static_cast<size_t>(ao + (k.trans_a ? l * m + i : i * kk + l))];
          const double bv = b[static_cast<size_t>(bo + (k.trans_b ? j * kk + l : l * n + j))];
          s += av * bv;
        }
        c[static_cast<size_t>(t * m * n + i * n + j)] = s;
      }
  }
  return c;
}

// Every flag combination, batched (one and two leading axes), with either operand shared,
// and unbatched: the forward kernel against the double product, and the gradient rule's
// nodes against central differences of <dC, op(A) op(B)>. The objective is bilinear, so
// the differences are exact up to rounding of the double sums (h = 1e-3 and values near
// 1: about 1e-13); what remains is the f32 kernels' rounding over at most 2 * 3 * 5 = 30
// terms: 1e-5 of max(1, |value|) bounds it with room.
TEST(Matmul, GradientRuleMatchesFiniteDifferences) {
  const int64_t m = 3, n = 4, kk = 5;
  std::mt19937 rng(41);
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<Case> cases;
  const std::vector<std::vector<int64_t>> batches = {{}, {2}, {2, 3}};
  for (const std::vector<int64_t>& batch : batches)
    for (int shared = 0; shared < (batch.empty() ? 1 : 3); ++shared)
      for (int flags = 0; flags < 4; ++flags)
        cases.push_back({batch, (flags & 1) != 0, (flags & 2) != 0, shared == 1, shared == 2});
  for (const Case& k : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "batch axes " << k.batch.size() << " trans_a " << k.trans_a << " trans_b "
                 << k.trans_b << " shared a " << k.a_shared << " shared b " << k.b_shared);
    int64_t batch = 1;
    for (int64_t s : k.batch) batch *= s;
    std::vector<int64_t> as = k.a_shared ? std::vector<int64_t>{} : k.batch,
                         bs = k.b_shared ? std::vector<int64_t>{} : k.batch, cs = k.batch;
    as.push_back(k.trans_a ? kk : m), as.push_back(k.trans_a ? m : kk);
    bs.push_back(k.trans_b ? n : kk), bs.push_back(k.trans_b ? kk : n);
    cs.push_back(m), cs.push_back(n);
    GraphEval e;
    ir::Value* a = e.input("a", f32Of(as));
    ir::Value* b = e.input("b", f32Of(bs));
    auto mm = e.add(ir::MatmulArgs{.a = a, .b = b, .trans_a = k.trans_a, .trans_b = k.trans_b}.spec(
        {.names = {"c"}}));
    ASSERT_TRUE(mm.ok()) << mm.status();
    ASSERT_EQ(ir::toString((*mm)->result()->type()), ir::toString(f32Of(cs)));
    ir::Value* dc = e.input("dc", (*mm)->result()->type());
    std::vector<ir::Value*> g = e.grad(**mm, dc);
    std::vector<double> av(static_cast<size_t>(a->type().numElements())),
        bv(static_cast<size_t>(b->type().numElements())),
        dv(static_cast<size_t>(dc->type().numElements()));
    for (auto* v : {&av, &bv, &dv})
      for (double& x : *v) x = static_cast<float>(d(rng));  // f32-representable
    fillFrom(e.buffer(a), av), fillFrom(e.buffer(b), bv), fillFrom(e.buffer(dc), dv);
    e.run();
    const std::vector<double> want_c = naiveMatmul(k, av, bv, m, n, kk, batch);
    EXPECT_LE(maxRelativeError(e.buffer((*mm)->result()).f32(), want_c.data(),
                               static_cast<int64_t>(want_c.size())),
              1e-5);
    auto objective = [&](const std::vector<double>& x, const std::vector<double>& y) {
      const std::vector<double> c = naiveMatmul(k, x, y, m, n, kk, batch);
      double s = 0;
      for (size_t i = 0; i < c.size(); ++i) s += c[i] * dv[i];
      return s;
    };
    constexpr double h = 1e-3;
    for (int operand = 0; operand < 2; ++operand) {
      std::vector<double> want(operand == 0 ? av.size() : bv.size());
      for (size_t i = 0; i < want.size(); ++i) {
        std::vector<double> x = av, y = bv;
        std::vector<double>& p = operand == 0 ? x : y;
        p[i] += h;
        const double up = objective(x, y);
        p[i] -= 2 * h;
        want[i] = (up - objective(x, y)) / (2 * h);
      }
      ASSERT_NE(g[static_cast<size_t>(operand)], nullptr);
      Buffer& got = e.buffer(g[static_cast<size_t>(operand)]);
      ASSERT_EQ(got.size(), static_cast<int64_t>(want.size()));
      EXPECT_LE(maxRelativeError(got.f32(), want.data(), got.size()), 1e-5)
          << (operand == 0 ? "da" : "db");
    }
  }
}

// ---- reshape and transpose ------------------------------------------------------------

TEST(Transpose, MovesEveryElementAndItsGradientMovesThemBack) {
  GraphEval e;
  ir::Value* x = e.input("x", f32Of({2, 3, 4, 5}));
  auto t = e.add(
      ir::TransposeArgs{.x = x, .perm = std::vector<int64_t>{0, 2, 1, 3}}.spec({.names = {"y"}}));
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(ir::toString((*t)->result()->type()), "f32[2,4,3,5]");
  ir::Value* dy = e.input("dy", (*t)->result()->type());
  std::vector<ir::Value*> g = e.grad(**t, dy);
  for (int64_t i = 0; i < 120; ++i) e.buffer(x).f32()[i] = static_cast<float>(i);
  for (int64_t i = 0; i < 120; ++i) e.buffer(dy).f32()[i] = static_cast<float>(1000 + i);
  e.run();
  Buffer& y = e.buffer((*t)->result());
  Buffer& dx = e.buffer(g[0]);
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 4; ++c)
        for (int64_t d = 0; d < 5; ++d) {
          const int64_t xi = ((a * 3 + b) * 4 + c) * 5 + d, yi = ((a * 4 + c) * 3 + b) * 5 + d;
          ASSERT_EQ(y.f32()[yi], static_cast<float>(xi));
          // transpose is linear: its gradient is the inverse permutation of dy.
          ASSERT_EQ(dx.f32()[xi], static_cast<float>(1000 + yi));
        }
}

TEST(Reshape, KeepsTheBytesAndItsGradientTakesTheInputsShape) {
  GraphEval e;
  ir::Value* x = e.input("x", f32Of({2, 3, 4}));
  auto r =
      e.add(ir::ReshapeArgs{.x = x, .shape = std::vector<int64_t>{-1, 4}}.spec({.names = {"y"}}));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(ir::toString((*r)->result()->type()), "f32[6,4]");  // -1 inferred
  ir::Value* dy = e.input("dy", (*r)->result()->type());
  std::vector<ir::Value*> g = e.grad(**r, dy);
  ASSERT_EQ(ir::toString(g[0]->type()), "f32[2,3,4]");
  for (int64_t i = 0; i < 24; ++i) e.buffer(x).f32()[i] = static_cast<float>(i);
  for (int64_t i = 0; i < 24; ++i) e.buffer(dy).f32()[i] = static_cast<float>(-i);
  e.run();
  for (int64_t i = 0; i < 24; ++i) {
    EXPECT_EQ(e.buffer((*r)->result()).f32()[i], static_cast<float>(i));
    EXPECT_EQ(e.buffer(g[0]).f32()[i], static_cast<float>(-i));
  }
}

TEST(Transpose, Bf16MovesTheSameBits) {
  SingleOp f(ir::Op::kTranspose, {bf16({3, 7})}, {{"perm", std::vector<int64_t>{1, 0}}});
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> d(-3, 3);
  for (int64_t i = 0; i < 21; ++i) f.in(0).bf16()[i] = d(rng);
  f.run();
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 7; ++j)
      EXPECT_EQ(static_cast<float>(f.out().bf16()[j * 3 + i]),
                static_cast<float>(f.in(0).bf16()[i * 7 + j]));
}

// ---- bad input ------------------------------------------------------------------------

std::string createError(GraphEval& e, ir::NodeSpec spec) {
  auto n = e.add(std::move(spec));
  return n.ok() ? std::string("no error") : std::string(n.status().message());
}

TEST(Matmul, BadOperandsAreErrorsNamingTheNodeAndOperand) {
  GraphEval e;
  ir::Value* act = e.input("act", f32Of({2, 3, 5}));
  ir::Value* weight = e.input("weight", f32Of({4, 7}));
  ir::Value* vec = e.input("vec", f32Of({5}));
  ir::Value* other = e.input("other", f32Of({3, 5, 7}));
  ir::Value* labels = e.input("labels", ir::TensorType{ir::DType::kI32, {5, 7}});
  struct Bad {
    ir::NodeSpec spec;
    std::vector<std::string> says;
  };
  const Bad bad[] = {
      {ir::MatmulArgs{.a = act, .b = weight}.spec({.names = {"scores"}}),
       {"%scores", "inner sizes differ", "a (%act: f32[2,3,5])", "b (%weight: f32[4,7])", "5",
        "4"}},
      {ir::MatmulArgs{.a = act, .b = other}.spec({.names = {"mixed"}}),
       {"%mixed", "batch axes", "a (%act", "b (%other"}},
      {ir::MatmulArgs{.a = vec, .b = weight}.spec({.names = {"flat"}}),
       {"%flat", "a (%vec: f32[5])", "rank 2 or more"}},
      {ir::MatmulArgs{.a = act, .b = labels}.spec({.names = {"ints"}}),
       {"%ints", "b (%labels: i32[5,7])", "f32 or bf16"}},
      {ir::TransposeArgs{.x = act, .perm = std::vector<int64_t>{0, 2}}.spec({.names = {"short"}}),
       {"%short", "perm=[0,2]", "x (%act: f32[2,3,5])", "every axis"}},
      {ir::TransposeArgs{.x = act, .perm = std::vector<int64_t>{0, 1, 1}}.spec(
           {.names = {"twice"}}),
       {"%twice", "perm=[0,1,1]", "once"}},
      {ir::TransposeArgs{.x = act, .perm = std::vector<int64_t>{0, 1, 3}}.spec(
           {.names = {"outside"}}),
       {"%outside", "perm=[0,1,3]", "0 to 2"}},
      {ir::ReshapeArgs{.x = act, .shape = std::vector<int64_t>{7, 4}}.spec({.names = {"count"}}),
       {"%count", "shape=[7,4]", "28 elements", "x (%act: f32[2,3,5])", "30"}},
      {ir::ReshapeArgs{.x = act, .shape = std::vector<int64_t>{-1, -1}}.spec({.names = {"twice"}}),
       {"%twice", "shape=[-1,-1]", "at most one -1"}},
      {ir::ReshapeArgs{.x = act, .shape = std::vector<int64_t>{-1, 7}}.spec(
           {.names = {"inferred"}}),
       {"%inferred", "shape=[-1,7]", "cannot infer", "x (%act: f32[2,3,5])", "30 elements"}},
  };
  for (const Bad& b : bad) {
    const std::string err = createError(e, b.spec);
    for (const std::string& want : b.says)
      EXPECT_NE(err.find(want), std::string::npos) << err << "\nlacks: " << want;
  }
}

}  // namespace
}  // namespace tandem::testing

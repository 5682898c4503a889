// layer_norm and layer_norm_backward through their kernel slots and layer_norm's gradient
// rule: against PyTorch 1.13 (nn.LayerNorm's forward and autograd: the cases the layer
// norm core is tested on, tests/data/transformer_refs) and central differences of a
// double layer norm.

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "graph_eval.h"
#include "gtest/gtest.h"
#include "ir/op_views.h"
#include "kernel_test_util.h"
#include "tests/cores/ref_case.h"

namespace tandem::testing {
namespace {

struct LayerNormGraph {
  GraphEval e;
  ir::Value *x, *gamma, *beta, *dy;
  ir::Node* ln = nullptr;
  std::vector<ir::Value*> grads;

  LayerNormGraph(const ir::Shape& shape, double eps) {
    x = e.input("x", ir::TensorType{ir::DType::kF32, shape});
    gamma = e.input("gamma", f32Of({shape.back()}));
    beta = e.input("beta", f32Of({shape.back()}));
    auto n = e.add(ir::LayerNormArgs{.x = x, .gamma = gamma, .beta = beta, .eps = eps}.spec(
        {.names = {"y", "mean", "var"}}));
    EXPECT_TRUE(n.ok()) << n.status();
    ln = *n;
    dy = e.input("dy", x->type());
    grads = e.grad(*ln, dy);
  }
};

// Tolerances as the core tests': 1e-5 of the tensor's scale (f32 sums of 64 terms in
// another order, and a square root).
TEST(LayerNorm, ForwardAndGradientRuleMatchPyTorch) {
  for (const char* name : {"layer_norm_odd", "layer_norm_vit"}) {
    SCOPED_TRACE(name);
    auto loaded = RefCase::load(name);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    const RefCase& c = *loaded;
    LayerNormGraph g({c.integer("rows"), c.integer("width")}, c.num("eps"));
    fillFrom(g.e.buffer(g.x), c.tensor("x").values);
    fillFrom(g.e.buffer(g.gamma), c.tensor("gamma").values);
    fillFrom(g.e.buffer(g.beta), c.tensor("beta").values);
    fillFrom(g.e.buffer(g.dy), c.tensor("dy").values);
    g.e.run();
    for (size_t r = 0; r < 3; ++r) {
      const char* what[] = {"y", "mean", "var"};
      EXPECT_LE(relativeError(valuesOf(g.e.buffer(g.ln->result(r))), c.tensor(what[r])), 1e-5)
          << what[r];
    }
    const char* grad_names[] = {"dx", "dgamma", "dbeta"};
    for (size_t i = 0; i < 3; ++i)
      EXPECT_LE(relativeError(valuesOf(g.e.buffer(g.grads[i])), c.tensor(grad_names[i])), 1e-5)
          << grad_names[i];
  }
}

/// sum over the rows of <dy, layer_norm(x) * gamma + beta>, in double.
double objective(const std::vector<double>& x, const std::vector<double>& gamma,
                 const std::vector<double>& beta, const std::vector<double>& dy, int64_t width,
                 double eps) {
  double s = 0;
  const int64_t rows = static_cast<int64_t>(x.size()) / width;
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < width; ++j) mean += x[static_cast<size_t>(r * width + j)];
    mean /= static_cast<double>(width);
    for (int64_t j = 0; j < width; ++j) {
      const double d = x[static_cast<size_t>(r * width + j)] - mean;
      var += d * d;
    }
    var /= static_cast<double>(width);
    for (int64_t j = 0; j < width; ++j) {
      const size_t i = static_cast<size_t>(r * width + j), k = static_cast<size_t>(j);
      s += dy[i] * ((x[i] - mean) / std::sqrt(var + eps) * gamma[k] + beta[k]);
    }
  }
  return s;
}

// Three leading axes (rows = 2 * 3 * 2), width 5: central differences with h = 1e-3 of the
// double objective err by about h^2 |f'''| ~ 1e-6 of values near 1 (the normalization's
// third derivative is of order 1/var^1.5 with var ~ 1/3 here); the f32 kernels add a few
// ulps over 5-term sums. 1e-4 of max(1, |value|) bounds both with room.
TEST(LayerNorm, GradientRuleMatchesFiniteDifferences) {
  const ir::Shape shape{2, 3, 2, 5};
  const double eps = 1e-5;
  LayerNormGraph g(shape, eps);
  std::mt19937 rng(43);
  std::uniform_real_distribution<double> d(-1, 1);
  auto values = [&](ir::Value* v) {
    std::vector<double> out(static_cast<size_t>(v->type().numElements()));
    for (double& x : out) x = static_cast<float>(d(rng));
    fillFrom(g.e.buffer(v), out);
    return out;
  };
  std::vector<double> x = values(g.x), gamma = values(g.gamma), beta = values(g.beta),
                      dy = values(g.dy);
  g.e.run();
  std::vector<double>* inputs[] = {&x, &gamma, &beta};
  constexpr double h = 1e-3;
  for (size_t operand = 0; operand < 3; ++operand) {
    std::vector<double>& p = *inputs[operand];
    std::vector<double> want(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      const double keep = p[i];
      p[i] = keep + h;
      const double up = objective(x, gamma, beta, dy, shape.back(), eps);
      p[i] = keep - h;
      want[i] = (up - objective(x, gamma, beta, dy, shape.back(), eps)) / (2 * h);
      p[i] = keep;
    }
    Buffer& got = g.e.buffer(g.grads[operand]);
    EXPECT_LE(maxRelativeError(got.f32(), want.data(), got.size()), 1e-4) << "operand " << operand;
  }
}

TEST(LayerNorm, BadOperandsAreErrorsNamingTheNodeAndOperand) {
  GraphEval e;
  ir::Value* x = e.input("tokens", f32Of({4, 8}));
  ir::Value* wide = e.input("wide", f32Of({9}));
  ir::Value* ok = e.input("ok", f32Of({8}));
  auto n = e.add(
      ir::LayerNormArgs{.x = x, .gamma = wide, .beta = ok, .eps = 1e-5}.spec({.names = {"ln1"}}));
  ASSERT_FALSE(n.ok());
  const std::string err(n.status().message());
  for (const char* want : {"%ln1", "gamma (%wide: f32[9])", "f32[8]"})
    EXPECT_NE(err.find(want), std::string::npos) << err << "\nlacks: " << want;
  auto bad_eps =
      e.add(ir::LayerNormArgs{.x = x, .gamma = ok, .beta = ok, .eps = 0}.spec({.names = {"ln2"}}));
  ASSERT_FALSE(bad_eps.ok());
  EXPECT_NE(std::string(bad_eps.status().message()).find("eps"), std::string::npos)
      << bad_eps.status();
}

}  // namespace
}  // namespace tandem::testing

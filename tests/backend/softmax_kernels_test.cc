// softmax and log_softmax over an axis, through their kernel slots and gradient rules:
// against PyTorch 1.13 (the cases the softmax core is tested on, every axis position) and
// central differences of a double softmax; bad axes are errors naming node and operand.

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

struct SoftmaxGraph {
  GraphEval e;
  ir::Value *x, *dy;
  ir::Node* op = nullptr;
  std::vector<ir::Value*> grads;

  SoftmaxGraph(const ir::Shape& shape, int64_t axis, bool log) {
    x = e.input("x", ir::TensorType{ir::DType::kF32, shape});
    auto n = e.add(log ? ir::LogSoftmaxArgs{.x = x, .axis = axis}.spec({.names = {"y"}})
                       : ir::SoftmaxArgs{.x = x, .axis = axis}.spec({.names = {"y"}}));
    EXPECT_TRUE(n.ok()) << n.status();
    op = *n;
    dy = e.input("dy", x->type());
    grads = e.grad(*op, dy);
  }
};

// 1e-5 of the tensor's scale: the core tests' kF32Math (exp and log approximations, and
// the gradient's difference of nearly equal terms).
TEST(Softmax, ForwardAndGradientRuleMatchPyTorchOverEveryAxis) {
  for (const char* name : {"softmax_last", "softmax_middle", "softmax_first", "log_softmax_last",
                           "log_softmax_middle"}) {
    SCOPED_TRACE(name);
    auto loaded = RefCase::load(name);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    const RefCase& c = *loaded;
    const std::vector<int64_t>& s = c.tensor("x").shape;
    SoftmaxGraph g(ir::Shape(s.begin(), s.end()), c.integer("axis"), c.flag("log"));
    fillFrom(g.e.buffer(g.x), c.tensor("x").values);
    fillFrom(g.e.buffer(g.dy), c.tensor("dy").values);
    g.e.run();
    EXPECT_LE(relativeError(valuesOf(g.e.buffer(g.op->result())), c.tensor("y")), 1e-5) << "y";
    EXPECT_LE(relativeError(valuesOf(g.e.buffer(g.grads[0])), c.tensor("dx")), 1e-5) << "dx";
  }
}

// [3, 4, 5] over each axis, both forms: h = 1e-4 central differences of the double
// objective <dy, f(x)> err by h^2 |f'''| / 6 < 1e-8; the f32 kernels by a few ulps of
// sums of at most 5 terms: 1e-5 of max(1, |value|).
TEST(Softmax, GradientRuleMatchesFiniteDifferences) {
  const ir::Shape shape{3, 4, 5};
  std::mt19937 rng(44);
  std::uniform_real_distribution<double> d(-2, 2);
  for (bool log : {false, true})
    for (int64_t axis : {0, 1, -1}) {
      SCOPED_TRACE(::testing::Message() << (log ? "log_softmax" : "softmax") << " axis " << axis);
      SoftmaxGraph g(shape, axis, log);
      std::vector<double> x(60), dy(60);
      for (double& v : x) v = static_cast<float>(d(rng));
      for (double& v : dy) v = static_cast<float>(d(rng));
      fillFrom(g.e.buffer(g.x), x);
      fillFrom(g.e.buffer(g.dy), dy);
      g.e.run();
      const int64_t a = axis < 0 ? axis + 3 : axis;
      int64_t inner = 1;
      for (int64_t i = a + 1; i < 3; ++i) inner *= shape[static_cast<size_t>(i)];
      const int64_t len = shape[static_cast<size_t>(a)];
      auto objective = [&](const std::vector<double>& v) {
        double s = 0;
        for (size_t i = 0; i < v.size(); ++i) {
          // the line through element i along the axis
          const int64_t idx = static_cast<int64_t>(i), pos = idx / inner % len,
                        first = idx - pos * inner;
          double mx = -1e300, sum = 0;
          for (int64_t j = 0; j < len; ++j)
            mx = std::max(mx, v[static_cast<size_t>(first + j * inner)]);
          for (int64_t j = 0; j < len; ++j)
            sum += std::exp(v[static_cast<size_t>(first + j * inner)] - mx);
          const double y = log ? v[i] - mx - std::log(sum) : std::exp(v[i] - mx) / sum;
          s += dy[i] * y;
        }
        return s;
      };
      constexpr double h = 1e-4;
      std::vector<double> want(60);
      for (size_t i = 0; i < 60; ++i) {
        std::vector<double> v = x;
        v[i] += h;
        const double up = objective(v);
        v[i] -= 2 * h;
        want[i] = (up - objective(v)) / (2 * h);
      }
      Buffer& got = g.e.buffer(g.grads[0]);
      EXPECT_LE(maxRelativeError(got.f32(), want.data(), got.size()), 1e-5);
    }
}

TEST(Softmax, AnAxisOutsideTheRankIsAnErrorNamingNodeAndOperand) {
  GraphEval e;
  ir::Value* x = e.input("scores", f32Of({2, 3}));
  for (int64_t axis : {2, -3}) {
    auto n = e.add(ir::SoftmaxArgs{.x = x, .axis = axis}.spec({.names = {"attn"}}));
    ASSERT_FALSE(n.ok());
    const std::string err(n.status().message());
    for (const std::string& want : {std::string("%attn"), "axis=" + std::to_string(axis),
                                    std::string("x (%scores: f32[2,3])")})
      EXPECT_NE(err.find(want), std::string::npos) << err << "\nlacks: " << want;
  }
}

}  // namespace
}  // namespace tandem::testing

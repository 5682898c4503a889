// sgd_update against a hand loop, with and without momentum and weight decay; adamw_update
// against PyTorch's formula in double.

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "ir/op_views.h"
#include "kernel_test_util.h"
#include "tests/device_kinds.h"

namespace tandem::testing {
namespace {

/// sgd_update's operands w and m must be read straight from variables, so the node under
/// test gets param nodes for them (SingleOp makes every operand a graph input).
class SgdOp {
 public:
  SgdOp(const ir::Shape& shape, double lr, double momentum, double weight_decay)
      : module_("sgd"), ctx_(device_, 1) {
    bool buffer = momentum > 0;
    EXPECT_TRUE(module_.addVar({"w", f32(shape), ir::VarRole::kParam, {}}).ok());
    if (buffer) {
      EXPECT_TRUE(module_.addVar({"m", f32(shape), ir::VarRole::kOptimizer, {}}).ok());
    }
    ir::Graph* g = *module_.addGraph("t");
    ir::NodeSpec spec;
    spec.op = ir::Op::kSgdUpdate;
    spec.device = device_;
    spec.attrs = {{"lr", lr}, {"momentum", momentum}, {"weight_decay", weight_decay}};
    spec.operands = {param(g, "w"), input(g, f32(shape))};
    if (buffer) spec.operands.push_back(param(g, "m"));
    auto n = g->create(std::move(spec));
    EXPECT_TRUE(n.ok()) << n.status();
    for (size_t i = 0; i < (buffer ? 3 : 2); ++i) buffers_.emplace_back(f32(shape));
    if (!n.ok()) return;
    auto k = backend::cpu::makeKernel(**n, ctx_);
    EXPECT_TRUE(k.ok()) << k.status();
    if (k.ok()) kernel_ = std::move(*k);
  }
  Buffer& w() { return buffers_[0]; }
  Buffer& g() { return buffers_[1]; }
  Buffer& m() { return buffers_[2]; }
  bool hasBuffer() const { return buffers_.size() > 2; }

  /// Runs the update in place on w (and m); sgd_update has no results.
  void run() {
    ASSERT_NE(kernel_, nullptr);
    std::vector<backend::TensorView> in;
    for (Buffer& b : buffers_) in.push_back(b.view());
    absl::Status s = kernel_->runHere(in, {});
    ASSERT_TRUE(s.ok()) << s;
  }

 private:
  ir::Value* param(ir::Graph* g, const std::string& var) {
    ir::NodeSpec spec;
    spec.op = ir::Op::kParam;
    spec.device = device_;
    spec.attrs = {{"var", ir::Symbol{var}}};
    auto n = g->create(std::move(spec));
    EXPECT_TRUE(n.ok()) << n.status();
    return n.ok() ? (*n)->result() : nullptr;
  }
  ir::Value* input(ir::Graph* g, ir::TensorType type) {
    ir::NodeSpec spec;
    spec.op = ir::Op::kInput;
    spec.names = {"g"};
    spec.declared_types = {std::move(type)};
    spec.device = device_;
    auto n = g->create(std::move(spec));
    EXPECT_TRUE(n.ok()) << n.status();
    return n.ok() ? (*n)->result() : nullptr;
  }

  ir::Device device_{::tandem::testing::kind("cpu"), 0};
  ir::Module module_;
  backend::cpu::CpuContext ctx_;
  std::vector<Buffer> buffers_;
  std::unique_ptr<backend::cpu::CpuKernel> kernel_;
};

struct Hyper {
  double lr, momentum, weight_decay;
};

class SgdUpdateTest : public ::testing::TestWithParam<Hyper> {};

TEST_P(SgdUpdateTest, MatchesHandLoop) {
  const Hyper& p = GetParam();
  const int64_t n = 105;
  SgdOp op({3, 5, 7}, p.lr, p.momentum, p.weight_decay);
  bool buffer = op.hasBuffer();
  std::mt19937 rng(41);
  op.w().fillUniform(rng);
  if (buffer) op.m().fillUniform(rng);
  std::vector<double> w(op.w().f32(), op.w().f32() + n), m(static_cast<size_t>(n), 0.0);
  if (buffer) m.assign(op.m().f32(), op.m().f32() + n);

  // Three steps with a fresh gradient each: the buffer carries over between them.
  for (int step = 0; step < 3; ++step) {
    op.g().fillUniform(rng);
    for (int64_t i = 0; i < n; ++i) {
      size_t k = static_cast<size_t>(i);
      double d = op.g().f32()[i] + p.weight_decay * w[k];
      if (buffer) {
        m[k] = p.momentum * m[k] + d;
        w[k] -= p.lr * m[k];
      } else {
        w[k] -= p.lr * d;
      }
    }
    op.run();
    EXPECT_LE(maxRelativeError(op.w().f32(), w.data(), n), 1e-6) << "step " << step;
    if (buffer) {
      EXPECT_LE(maxRelativeError(op.m().f32(), m.data(), n), 1e-6) << "step " << step;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Hyper, SgdUpdateTest,
                         ::testing::Values(Hyper{0.1, 0, 0}, Hyper{0.2, 0, 5e-4},
                                           Hyper{0.05, 0.9, 0}, Hyper{0.1, 0.9, 1e-3},
                                           Hyper{0, 0.5, 0.1}));

// One element by hand: w=1, g=0.5, m=2, lr=0.1, momentum=0.9, weight_decay=0.01:
// d = 0.51, m = 2.31, w = 1 - 0.231.
TEST(SgdUpdate, OneElementByHand) {
  SgdOp op({1}, 0.1, 0.9, 0.01);
  op.w().f32()[0] = 1;
  op.g().f32()[0] = 0.5;
  op.m().f32()[0] = 2;
  op.run();
  EXPECT_FLOAT_EQ(op.m().f32()[0], 2.31f);
  EXPECT_FLOAT_EQ(op.w().f32()[0], 0.769f);
  EXPECT_FLOAT_EQ(op.g().f32()[0], 0.5f);  // the gradient is read, not written
}

}  // namespace
}  // namespace tandem::testing

namespace tandem::testing {
namespace {

// sgd_update_group's shape rule takes each gradient in f32 or as its bf16 twin, but a
// kernel is made for one gradient dtype: a group that mixes them is refused, naming the
// node and the operand.
TEST(SgdUpdateGroup, MixedGradientDtypesAreRefusedNamingTheOperand) {
  const ir::TensorType w = f32({3});
  SingleOp op(ir::Op::kSgdUpdateGroup, {w, w, w, ir::TensorType{ir::DType::kBF16, {3}}},
              {{"lr", 0.1}, {"momentum", 0.0}, {"weight_decay", 0.0}},
              {ir::Var{"state0", w, ir::VarRole::kParam, {}},
               ir::Var{"state1", w, ir::VarRole::kParam, {}}},
              {}, {0, 1});
  auto k = backend::cpu::makeKernel(op.node(), op.ctx());
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(k.status().message(),
            op.node().describe() +
                ": the CPU kernel updates f32 weights from gradients of one dtype, f32 or "
                "bf16, not bf16 operand 3 (%in3) beside f32 gradient 1");
}

}  // namespace
}  // namespace tandem::testing

namespace tandem::testing {
namespace {

// adamw_update against PyTorch 1.13's formula (torch.optim.AdamW, _single_tensor_adamw)
// in double, three steps: the moments and the step count carry over, and the bias
// correction reads the count. Tolerance: the kernel works in f32 (a few roundings per
// element and step), so 1e-5 of max(1, |w|); a wrong bias correction is off by 1e-2.
struct AdamwCase {
  double lr, beta1, beta2, eps, weight_decay;
  bool bf16_grad;
};

class AdamwUpdateTest : public ::testing::TestWithParam<AdamwCase> {};

TEST_P(AdamwUpdateTest, MatchesPyTorchsFormulaInDouble) {
  const AdamwCase& p = GetParam();
  const ir::TensorType w_type = f32({4, 33});
  const ir::TensorType g_type{p.bf16_grad ? ir::DType::kBF16 : ir::DType::kF32, w_type.shape};
  const ir::TensorType count = f32({1});
  SingleOp op(ir::Op::kAdamwUpdate, {w_type, g_type, w_type, w_type, count},
              {{"lr", p.lr},
               {"beta1", p.beta1},
               {"beta2", p.beta2},
               {"eps", p.eps},
               {"weight_decay", p.weight_decay}},
              {ir::Var{"state0", w_type, ir::VarRole::kParam, {}},
               ir::Var{"state2", w_type, ir::VarRole::kOptimizer, {}},
               ir::Var{"state3", w_type, ir::VarRole::kOptimizer, {}},
               ir::Var{"state4", count, ir::VarRole::kOptimizer, {}}},
              {}, {0, 2, 3, 4});
  const int64_t n = w_type.numElements();
  std::mt19937 rng(7);
  op.in(0).fillUniform(rng);
  std::vector<double> w(op.in(0).f32(), op.in(0).f32() + n), m(static_cast<size_t>(n)),
      v(static_cast<size_t>(n));
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (int t = 1; t <= 3; ++t) {
    for (int64_t i = 0; i < n; ++i)  // fillUniform writes f32
      if (p.bf16_grad)
        op.in(1).bf16()[i] = uniform(rng);
      else
        op.in(1).f32()[i] = uniform(rng);
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = size_t(i);
      const double g = op.in(1).at(i);
      w[k] *= 1 - p.lr * p.weight_decay;
      m[k] = p.beta1 * m[k] + (1 - p.beta1) * g;
      v[k] = p.beta2 * v[k] + (1 - p.beta2) * g * g;
      const double denom = std::sqrt(v[k]) / std::sqrt(1 - std::pow(p.beta2, t)) + p.eps;
      w[k] -= p.lr / (1 - std::pow(p.beta1, t)) * m[k] / denom;
    }
    op.run();
    EXPECT_EQ(op.in(4).f32()[0], float(t));
    EXPECT_LE(maxRelativeError(op.in(0).f32(), w.data(), n), 1e-5) << "step " << t;
    EXPECT_LE(maxRelativeError(op.in(2).f32(), m.data(), n), 1e-5) << "step " << t;
    EXPECT_LE(maxRelativeError(op.in(3).f32(), v.data(), n), 1e-5) << "step " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(Hyper, AdamwUpdateTest,
                         ::testing::Values(AdamwCase{1e-3, 0.9, 0.999, 1e-8, 1e-2, false},
                                           AdamwCase{0.05, 0.8, 0.99, 1e-6, 0.1, false},
                                           AdamwCase{2e-3, 0.9, 0.999, 1e-8, 0, true},
                                           AdamwCase{1e-2, 0, 0, 1e-3, 0.5, false}));

// The shape rule: the step count is an f32[1] optimizer variable, the moments have the
// weight's type; each error names the operand.
TEST(AdamwUpdate, ShapeRuleNamesTheOperandAtFault) {
  const ir::TensorType w = f32({3});
  auto vars = [&](ir::TensorType m, ir::TensorType step) {
    return std::vector<ir::Var>{ir::Var{"state0", w, ir::VarRole::kParam, {}},
                                ir::Var{"state2", m, ir::VarRole::kOptimizer, {}},
                                ir::Var{"state3", w, ir::VarRole::kOptimizer, {}},
                                ir::Var{"state4", step, ir::VarRole::kOptimizer, {}}};
  };
  for (auto [m, step, expected] :
       {std::tuple{w, f32({3}), "must be f32[1] (the parameter's update count)"},
        std::tuple{f32({4}), f32({1}), "must have the same type"}}) {
    ir::Module module("t");
    for (ir::Var& v : vars(m, step)) ASSERT_TRUE(module.addVar(v).ok());
    ir::Graph* g = *module.addGraph("t");
    auto read = [&](const std::string& var) {
      return (*g->create(ir::ParamArgs{.var = var}.spec()))->result();
    };
    auto grad = g->create({.op = ir::Op::kInput, .names = {"g"}, .declared_types = {w}});
    ASSERT_TRUE(grad.ok());
    auto n = g->create(ir::AdamwUpdateArgs{.w = read("state0"),
                                           .g = (*grad)->result(),
                                           .m = read("state2"),
                                           .v = read("state3"),
                                           .step = read("state4"),
                                           .lr = 1e-3,
                                           .beta1 = 0.9,
                                           .beta2 = 0.999,
                                           .eps = 1e-8,
                                           .weight_decay = 0.0}
                           .spec());
    ASSERT_FALSE(n.ok());
    EXPECT_NE(n.status().message().find(expected), std::string::npos) << n.status();
  }
}

}  // namespace
}  // namespace tandem::testing

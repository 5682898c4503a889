// sgd_update against a hand loop, with and without momentum and weight decay.

#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
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

// dropout as an op: its CPU kernel is the core's mask (backend/dropout_mask.h) at the step
// @step holds when the kernel runs, from the node's sample_offset on; its gradient rule
// (dropout of dy with the same counters) matches finite differences; bf16 rounds once;
// bad operands and attributes are errors naming the node.

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/dropout_core.h"
#include "backend/dropout_mask.h"
#include "graph_eval.h"
#include "ir/op_views.h"

namespace tandem::testing {
namespace {

constexpr uint64_t kSeed = 1;  // GraphEval's CPU context's seed

const ir::Var kStep{
    std::string(ir::kStepVar), ir::TensorType{ir::DType::kI32, {1}}, ir::VarRole::kFed, {}};

/// x[6, 5, 7] (rows of 35: not a multiple of 4) dropped from row 4 of the whole batch.
struct DropoutGraph {
  GraphEval e;
  ir::Value* x;
  ir::Value* step;
  ir::Node* node;
  explicit DropoutGraph(ir::DType dtype = ir::DType::kF32, double p = 0.3) {
    x = e.input("x", ir::TensorType{dtype, {6, 5, 7}});
    step = e.variable(kStep);
    auto n =
        e.add(ir::DropoutArgs{.x = x, .step = step, .p = p, .mask_id = 2, .sample_offset = 4}.spec(
            {.names = {"drop"}}));
    EXPECT_TRUE(n.ok()) << n.status();
    node = *n;
  }
};

std::vector<float> expected(const std::vector<float>& x, int32_t step, double p) {
  std::vector<float> y(x.size());
  backend::cpu::dropoutApply(backend::dropoutMask(kSeed, step, 2, p), {4, 6, 35}, x.data(),
                             y.data());
  return y;
}

TEST(Dropout, KernelDrawsTheCoresMaskAtTheStepItReadsWhenItRuns) {
  DropoutGraph g;
  std::mt19937 rng(1);
  Buffer x(g.x->type()), step(g.step->type()), y(g.node->result()->type());
  x.fillUniform(rng);
  backend::cpu::CpuContext ctx(ir::Device{kind("cpu"), 0}, kSeed);
  auto k = backend::cpu::makeKernel(*g.node, ctx);
  ASSERT_TRUE(k.ok()) << k.status();
  const std::vector<float> xs(x.f32(), x.f32() + x.size());
  std::vector<float> previous;
  // One kernel, made once: the step is data, so every run draws that step's mask.
  for (int32_t s : {11, 12, 11, 0}) {
    step.i32()[0] = s;
    ASSERT_TRUE((*k)->runHere({x.view(), step.view()}, {y.view()}).ok());
    const std::vector<float> got(y.f32(), y.f32() + y.size());
    EXPECT_EQ(got, expected(xs, s, 0.3)) << "step " << s;
    if (!previous.empty()) {
      EXPECT_NE(got, previous) << "step " << s << " drew its neighbour's mask";
    }
    previous = got;
  }
}

// dropout is linear in x: dy/dx = mask * scale exactly, so central differences of the f32
// kernel's outputs recover it up to the rounding of x +- h and of the products: with |x|,
// |w| <= 1, h = 1/16 and scale = 1/0.7, at most 4 half-ulps of 2 times scale over 2h,
// below 3e-6; 1e-5 is the tolerance.
TEST(Dropout, GradientRuleMatchesFiniteDifferences) {
  DropoutGraph g;
  ir::Value* dy = g.e.input("dy", g.x->type());
  const std::vector<ir::Value*> grads = g.e.grad(*g.node, dy);
  ASSERT_EQ(grads.size(), 2u);
  ASSERT_NE(grads[0], nullptr);
  EXPECT_EQ(grads[1], nullptr) << "@step has no gradient";
  const ir::Node* rule = grads[0]->def();
  ASSERT_TRUE(ir::DropoutView::is(*rule)) << rule->describe();
  EXPECT_EQ(rule->attrs(), g.node->attrs()) << "the gradient draws with other counters";
  EXPECT_EQ(rule->operand(1), g.step);

  std::mt19937 rng(2);
  g.e.buffer(g.x).fillUniform(rng);
  g.e.buffer(dy).fillUniform(rng);  // w: the loss is sum(w * y)
  g.e.buffer(g.step).i32()[0] = 5;
  g.e.run();
  const std::vector<float> x = valuesOf(g.e.buffer(g.x)), w = valuesOf(g.e.buffer(dy)),
                           dx = valuesOf(g.e.buffer(grads[0]));
  const float h = 1.0f / 16;
  int64_t kept = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<float> plus = x, minus = x;
    plus[i] += h;
    minus[i] -= h;
    const std::vector<float> yp = expected(plus, 5, 0.3), ym = expected(minus, 5, 0.3);
    const double fd = w[i] * (double(yp[i]) - double(ym[i])) / (2.0 * h);
    EXPECT_NEAR(dx[i], fd, 1e-5) << "element " << i;
    kept += dx[i] != 0.0f ? 1 : 0;
  }
  // p = 0.3 of 210 elements: the kept count is binomial, mean 147, sd 6.6.
  EXPECT_GT(kept, 147 - 40);
  EXPECT_LT(kept, 147 + 40);
}

TEST(Dropout, Bf16IsTheF32ResultRoundedOnceUnderTheSameMask) {
  DropoutGraph f32(ir::DType::kF32), bf16(ir::DType::kBF16);
  std::mt19937 rng(3);
  Buffer& xf = f32.e.buffer(f32.x);
  xf.fillUniform(rng, -3, 3);
  Buffer& xb = bf16.e.buffer(bf16.x);
  for (int64_t i = 0; i < xf.size(); ++i) {
    xb.bf16()[i] = backend::bf16(xf.f32()[i]);
    xf.f32()[i] = static_cast<float>(xb.bf16()[i]);  // the same values in both
  }
  f32.e.buffer(f32.step).i32()[0] = bf16.e.buffer(bf16.step).i32()[0] = 9;
  f32.e.run();
  bf16.e.run();
  Buffer &yf = f32.e.buffer(f32.node->result()), &yb = bf16.e.buffer(bf16.node->result());
  EXPECT_EQ(bf16.node->result()->type().dtype, ir::DType::kBF16);
  for (int64_t i = 0; i < yf.size(); ++i) {
    const backend::bf16 want(yf.f32()[i]);
    uint16_t a, b;
    std::memcpy(&a, &yb.bf16()[i], 2);
    std::memcpy(&b, &want, 2);
    EXPECT_EQ(a, b) << "element " << i;
  }
}

std::string createError(GraphEval& e, ir::NodeSpec spec) {
  auto n = e.add(std::move(spec));
  return n.ok() ? std::string("no error") : std::string(n.status().message());
}

TEST(Dropout, BadOperandsAndAttributesAreErrorsNamingTheNode) {
  GraphEval e;
  ir::Value* x = e.input("x", f32Of({4, 3}));
  ir::Value* labels = e.input("labels", ir::TensorType{ir::DType::kI32, {4, 3}});
  ir::Value* step = e.variable(kStep);
  ir::Value* f32_step = e.input("f32_step", f32Of({1}));
  ir::Value* fed_step = e.input("fed_step", ir::TensorType{ir::DType::kI32, {1}});
  ir::Value* other =
      e.variable(ir::Var{"other", ir::TensorType{ir::DType::kI32, {1}}, ir::VarRole::kFed, {}});
  struct Bad {
    ir::NodeSpec spec;
    std::vector<std::string> says;
  };
  auto drop = [](ir::Value* x, ir::Value* step, double p, int64_t id, const char* name) {
    return ir::DropoutArgs{.x = x, .step = step, .p = p, .mask_id = id}.spec({.names = {name}});
  };
  const Bad bad[] = {
      {drop(x, step, 1.0, 0, "all"), {"%all", "p", "[0, 1)"}},
      {drop(x, step, -0.1, 0, "negative"), {"%negative", "p", "[0, 1)"}},
      {drop(x, step, std::nan(""), 0, "nan"), {"%nan", "p"}},
      {drop(x, step, 0.1, -1, "id"), {"%id", "mask_id"}},
      {drop(labels, step, 0.1, 0, "ints"), {"%ints", "x (%labels: i32[4,3])", "f32 or bf16"}},
      {drop(x, f32_step, 0.1, 0, "fstep"), {"%fstep", "step (%f32_step: f32[1])", "must be i32"}},
      {drop(x, fed_step, 0.1, 0, "input"),
       {"%input", "step (%fed_step: i32[1])", "read straight from a variable"}},
      {drop(x, other, 0.1, 0, "wrongvar"), {"%wrongvar", "@other", "must read @step"}},
      {ir::DropoutArgs{.x = x, .step = step, .p = 0.1, .mask_id = 0, .sample_offset = -2}.spec(
           {.names = {"offset"}}),
       {"%offset", "sample_offset"}},
      {ir::DropoutArgs{
           .x = x, .step = step, .p = 0.1, .mask_id = 0, .sample_offset = (int64_t{1} << 32) - 2}
           .spec({.names = {"past"}}),
       {"%past", "counter", "x (%x: f32[4,3])"}},
  };
  for (const Bad& b : bad) {
    const std::string err = createError(e, b.spec);
    for (const std::string& want : b.says)
      EXPECT_NE(err.find(want), std::string::npos) << err << "\nlacks: " << want;
  }
  // The largest offset whose rows the counter still holds is fine.
  EXPECT_EQ(
      createError(
          e,
          ir::DropoutArgs{
              .x = x, .step = step, .p = 0.1, .mask_id = 0, .sample_offset = (int64_t{1} << 32) - 4}
              .spec({.names = {"last"}})),
      "no error");
}

}  // namespace
}  // namespace tandem::testing

// constant, initialize and assign.

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/initializers.h"
#include "gtest/gtest.h"
#include "kernel_test_util.h"
#include "tests/device_kinds.h"

namespace tandem::testing {
namespace {

using Kind = ir::Initializer::Kind;

TEST(Constant, FillsDeclaredType) {
  SingleOp f(ir::Op::kConstant, {}, {{"value", 0.25}}, {}, {f32({2, 3})});
  f.run();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(f.out().f32()[i], 0.25f);

  SingleOp scalar(ir::Op::kConstant, {}, {{"value", -1.5}}, {},
                  {ir::TensorType{ir::DType::kF32, {}}});
  scalar.run();
  EXPECT_EQ(scalar.out().f32()[0], -1.5f);

  SingleOp i(ir::Op::kConstant, {}, {{"value", 7.0}}, {}, {i32({4})});
  i.run();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(i.out().i32()[k], 7);
}

TEST(Constant, RejectsFractionForI32) {
  SingleOp op(ir::Op::kConstant, {}, {{"value", 0.5}}, {}, {i32({4})});
  EXPECT_FALSE(backend::cpu::makeKernel(op.node(), op.ctx()).ok());
}

/// A single initialize node for a variable `name` of `type` with `init`.
SingleOp initOp(const std::string& name, ir::TensorType type, ir::Initializer init) {
  return SingleOp(ir::Op::kInitialize, {}, {{"var", ir::Symbol{name}}},
                  {ir::Var{name, std::move(type), ir::VarRole::kParam, init}});
}

std::vector<float> contents(Buffer& b) { return {b.f32(), b.f32() + b.size()}; }

void expectMeanStd(const std::vector<float>& v, double want_std, double std_tolerance) {
  double sum = 0, sq = 0;
  for (float x : v) sum += x;
  double mean = sum / static_cast<double>(v.size());
  for (float x : v) sq += (x - mean) * (x - mean);
  double std = std::sqrt(sq / static_cast<double>(v.size() - 1));
  EXPECT_NEAR(mean, 0.0, 5 * want_std / std::sqrt(static_cast<double>(v.size())));
  EXPECT_NEAR(std, want_std, std_tolerance * want_std);
}

TEST(Initialize, ZerosAndOnesAreExact) {
  SingleOp zeros = initOp("z", f32({3, 4}), {Kind::kZeros});
  for (int i = 0; i < 12; ++i) zeros.out().f32()[i] = 5;  // must be overwritten
  zeros.run();
  for (int i = 0; i < 12; ++i) EXPECT_EQ(zeros.out().f32()[i], 0.0f);

  SingleOp ones = initOp("o", f32({7}), {Kind::kOnes});
  ones.run();
  for (int i = 0; i < 7; ++i) EXPECT_EQ(ones.out().f32()[i], 1.0f);

  SingleOp count = initOp("c", ir::TensorType{ir::DType::kI32, {}}, {Kind::kZeros});
  count.out().i32()[0] = 3;
  count.run();
  EXPECT_EQ(count.out().i32()[0], 0);
}

// Kaiming: N(0, 2 / fan_in) with fan_in = C*K*K for a filter [O,C,K,K] (here 500).
TEST(Initialize, KaimingStatistics) {
  SingleOp op = initOp("conv.w", f32({50, 20, 5, 5}), {Kind::kKaiming});
  op.run();
  expectMeanStd(contents(op.out()), std::sqrt(2.0 / 500), 0.03);

  SingleOp fc = initOp("fc.w", f32({100, 400}), {Kind::kKaiming});
  fc.run();
  expectMeanStd(contents(fc.out()), std::sqrt(2.0 / 400), 0.03);
}

TEST(Initialize, NormalStatistics) {
  SingleOp op = initOp("w", f32({20000}), {Kind::kNormal, 0.01});
  op.run();
  expectMeanStd(contents(op.out()), 0.01, 0.03);
}

// The values depend on the run's seed and the variable's name only: the same on every
// device (so 1, 2 or 3 devices start alike), across runs, and for an odd element count.
TEST(Initialize, DeterministicPerSeedAndName) {
  ir::TensorType t = f32({4, 3, 3, 3});
  SingleOp a = initOp("stem.w", t, {Kind::kKaiming});
  SingleOp b = initOp("stem.w", t, {Kind::kKaiming});
  SingleOp other = initOp("stage1.w", t, {Kind::kKaiming});
  a.run();
  b.run();
  other.run();
  EXPECT_EQ(contents(a.out()), contents(b.out()));
  EXPECT_NE(contents(a.out()), contents(other.out()));

  // Another device with the same seed, and a second run of the same kernel.
  backend::cpu::CpuContext device1(ir::Device{::tandem::testing::kind("cpu"), 1}, a.ctx().seed());
  auto k = backend::cpu::makeKernel(a.node(), device1);
  ASSERT_TRUE(k.ok()) << k.status();
  Buffer again(t);
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE((*k)->runHere({}, {again.view()}).ok());
    EXPECT_EQ(contents(again), contents(a.out())) << "round " << round;
  }

  // Another seed gives other values.
  backend::cpu::CpuContext reseeded(ir::Device{::tandem::testing::kind("cpu"), 0},
                                    a.ctx().seed() + 1);
  auto r = backend::cpu::makeKernel(a.node(), reseeded);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE((*r)->runHere({}, {again.view()}).ok());
  EXPECT_NE(contents(again), contents(a.out()));
}

TEST(Initialize, VariableSeedMixesSeedAndName) {
  using backend::variableSeed;
  EXPECT_EQ(variableSeed(1, "w"), variableSeed(1, "w"));
  EXPECT_NE(variableSeed(1, "w"), variableSeed(2, "w"));
  EXPECT_NE(variableSeed(1, "w"), variableSeed(1, "b"));
  EXPECT_NE(variableSeed(1, "ab"), variableSeed(1, "ba"));
}

TEST(Initialize, KaimingNeedsRankTwo) {
  SingleOp op = initOp("fc.b", f32({10}), {Kind::kKaiming});
  auto k = backend::cpu::makeKernel(op.node(), op.ctx());
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("@fc.b"), absl::string_view::npos) << k.status();
}

// assign has no IR results: the runtime passes the variable's storage as the one out view.
TEST(Assign, CopiesIntoVariableStorage) {
  ir::TensorType t = f32({2, 3});
  SingleOp op(ir::Op::kAssign, {t}, {{"var", ir::Symbol{"w"}}},
              {ir::Var{"w", t, ir::VarRole::kParam, {}}});
  std::mt19937 rng(51);
  op.in(0).fillUniform(rng);
  auto k = backend::cpu::makeKernel(op.node(), op.ctx());
  ASSERT_TRUE(k.ok()) << k.status();
  Buffer storage(t);
  backend::TensorView in[] = {op.in(0).view()};
  backend::TensorView out[] = {storage.view()};
  ASSERT_TRUE((*k)->runHere(in, out).ok());
  EXPECT_EQ(std::memcmp(storage.f32(), op.in(0).f32(), 6 * sizeof(float)), 0);
}

}  // namespace
}  // namespace tandem::testing

// The CPU convolution rule (backend/cpu/conv_choice.h): its words, the geometry it reads off
// each pass, its choices for the measured shapes, the CPU target's algorithm rules that
// choose-algorithms and the plan verifier ask, and the kernels running what a plan says.

#include "backend/cpu/conv_choice.h"

#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/dnnl_util.h"
#include "backend/cpu/gemm_conv.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/target_info.h"
#include "backend/targets.h"
#include "gtest/gtest.h"
#include "ir/plan.h"
#include "kernel_test_util.h"

namespace tandem::testing {
namespace {

using backend::cpu::chooseConvStrategy;
using backend::cpu::ConvGeometry;
using backend::cpu::ConvHost;
using backend::cpu::ConvPass;
using backend::cpu::ConvStrategy;

TEST(ConvChoice, WordsRoundTrip) {
  for (ConvStrategy s : {ConvStrategy::kPlain, ConvStrategy::kBlocked, ConvStrategy::kWinograd,
                         ConvStrategy::kGemm}) {
    SCOPED_TRACE(std::string(backend::cpu::strategyWord(s)));
    EXPECT_EQ(backend::cpu::strategyNamed(backend::cpu::strategyWord(s)), s);
  }
  EXPECT_EQ(backend::cpu::strategyNamed("auto"), std::nullopt);
  EXPECT_EQ(backend::cpu::strategyNamed("fast"), std::nullopt);
}

/// x [2,3,8,8], w [4,3,3,3], stride 2, pad 1: y [2,4,4,4], whose last window reaches
/// (4-1)*2 + 3 - 8 - 1 = 0 rows of the end padding.
TEST(ConvChoice, GeometryOfEveryPass) {
  const ir::Shape x{2, 3, 8, 8}, w{4, 3, 3, 3}, y{2, 4, 4, 4};
  const SingleOp::Attrs attrs{{"stride", ir::Hw(2).toAttr()}, {"pad", ir::Hw(1).toAttr()}};
  SingleOp fwd(ir::Op::kConv2d, {f32(x), f32(w)}, attrs);
  SingleOp data(ir::Op::kConv2dBackwardData, {f32(y), f32(w), f32(x)}, attrs);
  SingleOp filter(ir::Op::kConv2dBackwardFilter, {f32(y), f32(x), f32(w)},
                  {attrs[0], attrs[1], {"bias", false}});
  for (auto [op, pass] :
       {std::pair{&fwd, ConvPass::kForward}, std::pair{&data, ConvPass::kBackwardData},
        std::pair{&filter, ConvPass::kBackwardFilter}}) {
    ASSERT_TRUE(op->built());
    const std::optional<ConvGeometry> g = backend::cpu::convGeometry(op->node());
    ASSERT_TRUE(g.has_value());
    EXPECT_EQ(g->pass, pass);
    EXPECT_EQ(ir::Shape({g->batch, g->channels, g->height, g->width}), x);
    EXPECT_EQ(std::vector<int64_t>({g->out_channels, g->out_height, g->out_width}),
              std::vector<int64_t>({4, 4, 4}));
    EXPECT_EQ(std::vector<int64_t>({g->kernel_h, g->kernel_w, g->stride_h, g->pad_h}),
              std::vector<int64_t>({3, 3, 2, 1}));
    EXPECT_EQ(g->pad_end_h, 0);
    EXPECT_EQ(g->pad_end_w, 0);
  }
  SingleOp relu(ir::Op::kRelu, {f32(x)});
  EXPECT_EQ(backend::cpu::convGeometry(relu.node()), std::nullopt);
}

ConvGeometry geometry(ConvPass pass, int64_t n, int64_t c, int64_t hw, int64_t o, int64_t k,
                      int64_t pad, ir::DType dtype = ir::DType::kF32) {
  const int64_t out = hw + 2 * pad - k + 1;
  return {.pass = pass,
          .dtype = dtype,
          .batch = n,
          .channels = c,
          .height = hw,
          .width = hw,
          .out_channels = o,
          .out_height = out,
          .out_width = out,
          .kernel_h = k,
          .kernel_w = k,
          .pad_h = pad,
          .pad_w = pad,
          .pad_end_h = pad,
          .pad_end_w = pad};
}

constexpr ConvPass kPasses[] = {ConvPass::kForward, ConvPass::kBackwardData,
                                ConvPass::kBackwardFilter};

// The choices conv_choice.cc's tables measured, pass by pass.
TEST(ConvChoice, LeNetRunsGemmWhereItsActivationsArePlain) {
  const ConvHost avx512{.avx512 = true}, avx2{.avx512 = false};
  for (ConvPass pass : kPasses) {
    const ConvGeometry conv1 = geometry(pass, 128, 1, 28, 20, 3, 0);
    const ConvGeometry conv2 = geometry(pass, 128, 20, 13, 50, 5, 0);
    EXPECT_EQ(chooseConvStrategy(conv2, /*gemm_runs=*/true, avx512), ConvStrategy::kGemm);
    if (pass == ConvPass::kBackwardFilter) {
      // One input channel: tap by tap on AVX-512 (oneDNN's blocked kernel where the
      // activations are blocked, or the rows too wide), its GEMM elsewhere.
      EXPECT_EQ(chooseConvStrategy(conv1, true, avx512), ConvStrategy::kTaps);
      EXPECT_EQ(chooseConvStrategy(conv1, false, avx512), ConvStrategy::kBlocked);
      EXPECT_EQ(chooseConvStrategy(geometry(pass, 32, 3, 56, 64, 3, 1), true, avx512),
                ConvStrategy::kBlocked);  // rows past two vectors
      EXPECT_EQ(chooseConvStrategy(geometry(pass, 32, 1, 28, 64, 3, 1), true, avx512),
                ConvStrategy::kBlocked);  // padding: the stem's shape
      EXPECT_EQ(chooseConvStrategy(conv1, true, avx2), ConvStrategy::kPlain);
    } else if (pass == ConvPass::kForward) {
      // One input channel, no padding: tap by tap on AVX-512, else im2col + matmul.
      EXPECT_EQ(chooseConvStrategy(conv1, true, avx512), ConvStrategy::kTaps);
      EXPECT_EQ(chooseConvStrategy(conv1, true, avx2), ConvStrategy::kGemm);
      EXPECT_EQ(chooseConvStrategy(geometry(pass, 32, 1, 28, 64, 3, 1), true, avx512),
                ConvStrategy::kGemm);  // padding: the stem's shape
    } else {
      EXPECT_EQ(chooseConvStrategy(conv1, true, avx512), ConvStrategy::kGemm);
    }
  }
  // With a blocked operand gemm cannot run: the direct rule.
  EXPECT_EQ(chooseConvStrategy(geometry(ConvPass::kForward, 128, 20, 13, 50, 5, 0), false, avx512),
            ConvStrategy::kBlocked);
  EXPECT_EQ(
      chooseConvStrategy(geometry(ConvPass::kBackwardData, 128, 20, 13, 50, 5, 0), false, avx512),
      ConvStrategy::kPlain);
  // bf16 runs the blocked JIT kernels.
  EXPECT_EQ(
      chooseConvStrategy(geometry(ConvPass::kForward, 128, 20, 13, 50, 5, 0, ir::DType::kBF16),
                         true, avx512),
      ConvStrategy::kBlocked);
}

TEST(ConvChoice, ResNetRunsWinogradOnlyWhereAllowed) {
  const ConvHost avx512{.avx512 = true}, exact{.avx512 = true, .winograd = false},
      avx2{.avx512 = false};
  for (ConvPass pass : kPasses) {
    const ConvGeometry g = geometry(pass, 32, 64, 28, 64, 3, 1);  // 1,568 output tiles
    EXPECT_EQ(chooseConvStrategy(g, true, avx512), ConvStrategy::kWinograd);
    EXPECT_NE(chooseConvStrategy(g, true, exact), ConvStrategy::kWinograd);
    EXPECT_NE(chooseConvStrategy(g, true, avx2), ConvStrategy::kWinograd);
    // 1x1 shortcuts: oneDNN's GEMM on the plain tensors.
    EXPECT_EQ(chooseConvStrategy(geometry(pass, 32, 64, 28, 128, 1, 0), true, avx512),
              ConvStrategy::kPlain);
  }
  // The backward filter past 4,096 tiles (N=128: 6,272) loses to the direct kernel.
  EXPECT_NE(
      chooseConvStrategy(geometry(ConvPass::kBackwardFilter, 128, 64, 28, 64, 3, 1), true, avx512),
      ConvStrategy::kWinograd);
}

/// The CPU target's rules, as choose-algorithms and the plan verifier ask them.
TEST(ConvChoice, TargetOffersAndChoosesWords) {
  backend::registerTargets();
  const ir::TargetInfo* cpu = ir::findTarget(*ir::DeviceKind::named("cpu"));
  ASSERT_NE(cpu, nullptr);
  const ir::AlgorithmRules& rules = cpu->algorithm_rules;
  ASSERT_TRUE(rules.offered && rules.choose);
  const bool avx512 = backend::cpu::hostHasAvx512Core();
  auto plain = [](const ir::Value&) { return ir::ActivationLayout::kPlain; };
  auto blocked = [](const ir::Value&) { return ir::ActivationLayout::kChannelBlocked; };

  SingleOp resnet(ir::Op::kConv2d, {f32({4, 64, 14, 14}), f32({64, 64, 3, 3})},
                  {{"stride", ir::Hw(1).toAttr()}, {"pad", ir::Hw(1).toAttr()}});
  ASSERT_TRUE(resnet.built());
  std::vector<std::string> expected{"plain", "blocked"};
  if (avx512) expected.emplace_back("winograd");
  EXPECT_EQ(rules.offered(resnet.node(), blocked), expected);
  expected.emplace_back("gemm");
  EXPECT_EQ(rules.offered(resnet.node(), plain), expected);
  // 4 x 4 x 4 = 64 output tiles: Winograd where AVX-512 has it, unless exact.
  EXPECT_EQ(rules.choose(resnet.node(), blocked, /*exact=*/false), avx512 ? "winograd" : "blocked");
  EXPECT_EQ(rules.choose(resnet.node(), blocked, /*exact=*/true), "blocked");

  SingleOp relu(ir::Op::kRelu, {f32({4, 64, 14, 14})});
  EXPECT_TRUE(rules.offered(relu.node(), plain).empty());
  EXPECT_EQ(rules.choose(relu.node(), plain, false), "");
}

/// Gives the graph of `op` a plan that says `algorithm` for its node.
void planAlgorithm(SingleOp& op, const std::string& algorithm) {
  ir::Graph* g = op.node().graph();
  auto plan = std::make_shared<ir::GraphPlan>();
  plan->nodes.resize(g->idBound());
  plan->add(ir::PlanPart::kAlgorithms);
  plan->of(op.node()).algorithm = algorithm;
  g->setPlan(std::move(plan));
}

std::string implementations(const backend::cpu::CpuKernel& k) {
  auto* p = dynamic_cast<const backend::cpu::ProgramKernel*>(&k);
  return p != nullptr ? p->program().implementations() : "";
}

// LeNet's conv2, whose rule is gemm: the kernel runs what the plan says instead.
TEST(ConvChoice, KernelRunsThePlannedAlgorithm) {
  SingleOp op(ir::Op::kConv2d, {f32({4, 20, 13, 13}), f32({50, 20, 5, 5})},
              {{"stride", ir::Hw(1).toAttr()}, {"pad", ir::Hw(0).toAttr()}});
  ASSERT_TRUE(op.built());
  auto make = [&] {
    backend::cpu::KernelOr k = backend::cpu::makeKernel(op.node(), op.ctx());
    EXPECT_TRUE(k.ok()) << k.status();
    return k.ok() ? std::move(*k) : nullptr;
  };
  auto unplanned = make();  // no plan: the rule
  ASSERT_NE(unplanned, nullptr);
  EXPECT_NE(dynamic_cast<backend::cpu::GemmConvKernel*>(unplanned.get()), nullptr);

  planAlgorithm(op, "plain");  // oneDNN's own GEMM convolution on the plain tensors
  auto plain = make();
  ASSERT_NE(plain, nullptr);
  EXPECT_NE(implementations(*plain).find("gemm"), std::string::npos) << implementations(*plain);

  planAlgorithm(op, "blocked");  // its JIT kernel, with reorders
  auto blocked = make();
  ASSERT_NE(blocked, nullptr);
  EXPECT_NE(implementations(*blocked).find("jit"), std::string::npos);
  EXPECT_EQ(implementations(*blocked).find("gemm"), std::string::npos) << implementations(*blocked);

  planAlgorithm(op, "gemm");
  auto gemm = make();
  EXPECT_NE(dynamic_cast<backend::cpu::GemmConvKernel*>(gemm.get()), nullptr);
}

// A device set to conv_algorithm=direct runs no Winograd, whatever the plan says.
TEST(ConvChoice, DirectDeviceOverridesAPlannedWinograd) {
  SingleOp op(ir::Op::kConv2d, {f32({4, 64, 14, 14}), f32({64, 64, 3, 3})},
              {{"stride", ir::Hw(1).toAttr()}, {"pad", ir::Hw(1).toAttr()}});
  ASSERT_TRUE(op.built());
  planAlgorithm(op, "winograd");
  backend::cpu::CpuContext direct(op.ctx().device(), op.ctx().seed(), /*winograd=*/false);
  backend::cpu::KernelOr k = backend::cpu::makeKernel(op.node(), direct);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(implementations(**k).find("wino"), std::string::npos) << implementations(**k);
}

}  // namespace
}  // namespace tandem::testing

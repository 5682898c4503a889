// Golden text tests: parse an input module from tests/golden/passes/, run one pipeline,
// and compare the canonical print with the expected file. Regenerate with
// TANDEM_UPDATE_GOLDEN=1 and read the diff before committing it.
//
// The per-pass cases chain: each pass's expected output is the next pass's input, so a
// change in one pass shows up in exactly one file. When regenerating, run the suite until
// it stops changing files (a regenerated output may be a later case's input).

#include <ostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ir/printer.h"
#include "passes/pipeline.h"
#include "tests/passes/pass_test_util.h"
#include "tests/test_util.h"

namespace tandem::testing {
namespace {

struct GoldenCase {
  std::string name;      // test name suffix
  std::string input;     // file in tests/golden/passes/
  std::string pipeline;  // pipeline text
  std::string expected;  // file in tests/golden/passes/
};

// Readable names in test listings instead of a byte dump.
void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.name << ": " << c.pipeline; }

std::string defaultOn(int devices, std::vector<double> weights = {}) {
  passes::PipelineConfig config;
  config.devices.clear();
  for (int d = 0; d < devices; ++d) config.devices.push_back({ir::DeviceKind::kCpu, d});
  config.weights = std::move(weights);
  return passes::defaultPipeline(config);
}

std::string bf16On(int devices, bool bf16_allreduce) {
  passes::PipelineConfig config;
  config.devices.clear();
  for (int d = 0; d < devices; ++d) config.devices.push_back({ir::DeviceKind::kCpu, d});
  config.bf16 = true;
  config.bf16_allreduce = bf16_allreduce;
  return passes::defaultPipeline(config);
}

std::vector<GoldenCase> cases() {
  return {
      // One pass at a time, chained.
      {"LenetAutodiff", "lenet.tir", "autodiff", "lenet.autodiff.tir"},
      {"LenetReplicate2", "lenet.autodiff.tir", "replicate{devices=2}", "lenet.replicate2.tir"},
      {"LenetInsertCollectives2", "lenet.replicate2.tir", "insert-collectives",
       "lenet.collectives2.tir"},
      {"LenetDceAfterCollectives", "lenet.collectives2.tir", "dce", "lenet.collectives2.tir"},
      // The same steps as one pipeline give the same files.
      {"LenetAutodiffReplicate2", "lenet.tir", "autodiff,replicate{devices=[cpu:0,cpu:1]}",
       "lenet.replicate2.tir"},
      {"LenetDefault2", "lenet.tir", defaultOn(2), "lenet.default2.tir"},
      // schedule: the loss and correct-count reductions move ahead of the updates, which
      // wait for the gradient reductions and so go last; then the execution plan.
      {"LenetSchedule2", "lenet.collectives2.tir",
       "schedule,assign-streams,plan-events,plan-memory", "lenet.default2.tir"},
      // 256 on 3 devices: 86/85/85, divisor still 256.
      {"LenetDefault3", "lenet.tir", defaultOn(3), "lenet.default3.tir"},
      // Uneven device speeds: 3:1 gives 192/64.
      {"LenetReplicateWeights31", "lenet.autodiff.tir", "replicate{devices=2,weights=[3,1]}",
       "lenet.replicate2_w31.tir"},
      {"LenetDefaultWeights31", "lenet.tir", defaultOn(2, {3, 1}), "lenet.default2_w31.tir"},
      // Optimizer state: a zero-initialized momentum variable per parameter.
      {"LenetAutodiffMomentum", "lenet.tir", "autodiff{lr=0.05,momentum=0.9,weight-decay=0.0005}",
       "lenet.autodiff_momentum.tir"},
      {"LenetDefaultMomentum2", "lenet.autodiff_momentum.tir",
       "replicate{devices=2},insert-collectives,dce", "lenet.default2_momentum.tir"},
      // Small caps: the ~0.5 MB of LeNet gradients fall into four buckets.
      {"LenetSmallBuckets", "lenet.replicate2.tir",
       "insert-collectives{bucket-mb=0.05,first-bucket-mb=0.001}", "lenet.small_buckets.tir"},
      // Hierarchical reduction on 4 devices in 2 groups: all_reduce within {0,1} and {2,3}
      // (groups=2), across cpu:0 and cpu:2, broadcast back within each group.
      {"LenetHierarchical4", "lenet.autodiff.tir",
       "replicate{devices=4},insert-collectives{groups=2,bucket-mb=0.3,first-bucket-mb=0.1},dce",
       "lenet.hierarchical4.tir"},
      // Fusion: conv -> batch_norm -> relu chains of the batch-norm LeNet, and ResNet-18's
      // residual joins (conv -> batch_norm -> add -> relu), forward, backward and eval.
      {"LenetBnFused", "lenet_bn.autodiff.tir", "fuse-conv-bn-relu", "lenet_bn.fused.tir"},
      {"Resnet18Fused", "resnet18.autodiff.tir", "fuse-conv-bn-relu", "resnet18.fused.tir"},
      // Backward recomputes each conv -> bn -> relu output right before its first backward
      // reader (max_pool2d_backward), from the all-reduced statistics under sync batch norm.
      {"LenetBnRecomputedSyncBn2", "lenet_bn.fused.tir",
       "replicate{devices=2},insert-collectives{sync-bn=true},recompute-bn-relu",
       "lenet_bn.recomputed_sync_bn2.tir"},
      // Mixed precision: bf16 activations between f32 variables; casts only at the input
      // and the logits (weights are read as f32 masters by conv2d and linear).
      {"LenetMixedPrecision", "lenet.tir", "mixed-precision{dtype=bf16}", "lenet.bf16.tir"},
      // Autodiff then derives a bf16 backward whose gradients reach the variables in f32.
      {"LenetBf16Autodiff", "lenet.bf16.tir", "autodiff", "lenet.bf16.autodiff.tir"},
      // Two devices, gradients reduced in bf16: cast where each is made, bf16 all_reduce,
      // updates reading the bf16 sums.
      {"LenetBf16Default2Bf16AllReduce", "lenet.tir", bf16On(2, true),
       "lenet.bf16_default2_bf16_allreduce.tir"},
      // Batch norm with bf16 activations keeps f32 parameters and statistics; the residual
      // adds join two bf16 branches.
      {"Resnet18MixedPrecision", "resnet18.tir", "mixed-precision{dtype=bf16}",
       "resnet18.bf16.tir"},
      {"Resnet18Bf16Fused", "resnet18.bf16.tir", "autodiff,fuse-conv-bn-relu",
       "resnet18.bf16.fused.tir"},
      // group-sgd-updates: each device's updates of one bucket as one sgd_update_group at
      // the place of the last; fc2.w, alone in bucket 0, stays an sgd_update.
      {"LenetSmallBucketsGrouped", "lenet.small_buckets.tir", "schedule,group-sgd-updates",
       "lenet.small_buckets_grouped.tir"},
      // With momentum: weights, gradients, then momentum buffers.
      {"LenetMomentumGrouped2", "lenet.default2_momentum.tir", "schedule,group-sgd-updates",
       "lenet.default2_momentum_grouped.tir"},
      // Gradients reduced in bf16: the group reads the bf16 sums.
      {"LenetBf16AllReduceGrouped", "lenet.bf16_default2_bf16_allreduce.tir", "group-sgd-updates",
       "lenet.bf16_default2_bf16_allreduce_grouped.tir"},
      // One device, no all_reduce: every update in one group.
      {"LenetDefault1Grouped", "lenet.default1.tir", "group-sgd-updates",
       "lenet.default1_grouped.tir"},
      // One device: only the host-to-device split.
      {"LenetDefault1", "lenet.tir", defaultOn(1), "lenet.default1.tir"},
      // Hand-written module with dead nodes in @init and @train_step.
      {"DceRemovesUnused", "dce_input.tir", "dce", "dce_expected.tir"},
  };
}

class PassGolden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(PassGolden, MatchesExpected) {
  const GoldenCase& c = GetParam();
  auto m = parseGoldenInput(c.input);
  ASSERT_NE(m, nullptr);
  absl::Status s = runPipeline(*m, c.pipeline);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(compareWithGolden(canonical(*m), kPassGoldenDir + c.expected), "")
      << "pipeline: " << c.pipeline;
}

INSTANTIATE_TEST_SUITE_P(Passes, PassGolden, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

// The LeNet input is the model as the frontend builds it; keep the two in step.
TEST(PassGoldenInput, LenetMatchesBuilder) {
  auto m = buildZooModel("lenet", 256);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(compareWithGolden(canonical(*m), kPassGoldenDir + "lenet.tir"), "");
}

// So is the ResNet-18 input (batch 4: the golden files stay readable).
TEST(PassGoldenInput, Resnet18MatchesBuilder) {
  auto m = buildZooModel("resnet18", 4);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(compareWithGolden(canonical(*m), kPassGoldenDir + "resnet18.tir"), "");
}

// Golden files are canonical text: they parse and print back byte for byte.
TEST(PassGoldenInput, ExpectedFilesRoundTrip) {
  for (const GoldenCase& c : cases()) {
    auto m = parseGoldenInput(c.expected);
    ASSERT_NE(m, nullptr) << c.expected;
    EXPECT_EQ(canonical(*m), readFile(sourcePath(kPassGoldenDir + c.expected))) << c.expected;
  }
}

}  // namespace
}  // namespace tandem::testing

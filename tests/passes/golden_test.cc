// End-to-end golden text: LeNet as the frontend builds it, and the whole default pipeline
// over it (execution plan included), compared with files in tests/golden/passes/ that
// guard the printer end to end. What each pass does is tested by its check lines
// (tests/checks/passes/*.tir, FileCheck), not here. Regenerate with
// TANDEM_UPDATE_GOLDEN=1 and read the diff before committing it. The plan is this host's
// (the CPU target's, backend/targets.cc): the files were made on an AVX-512 host, where
// conv1's backward filter plans `algo=blocked` (elsewhere the rule says plain).

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

std::string defaultOn(int devices) {
  passes::PipelineConfig config;
  config.devices.clear();
  for (int d = 0; d < devices; ++d) config.devices.push_back({::tandem::testing::kind("cpu"), d});
  return passes::defaultPipeline(config);
}

std::string bf16On(int devices, bool bf16_allreduce) {
  passes::PipelineConfig config;
  config.devices.clear();
  for (int d = 0; d < devices; ++d) config.devices.push_back({::tandem::testing::kind("cpu"), d});
  config.bf16 = true;
  config.bf16_allreduce = bf16_allreduce;
  return passes::defaultPipeline(config);
}

// The sharded weight update on three devices with momentum: LeNet's one bucket
// in uneven shards, the momentum as one sharded variable.
std::string shardedOn(int devices) {
  passes::PipelineConfig config;
  config.devices.clear();
  for (int d = 0; d < devices; ++d) config.devices.push_back({::tandem::testing::kind("cpu"), d});
  config.optimizer = ir::SgdConfig{.momentum = 0.9};
  config.shard_updates = true;
  return passes::defaultPipeline(config);
}

std::vector<GoldenCase> cases() {
  return {
      // Two devices: the plan's streams, waits and offsets as the runtime will follow them.
      {"LenetDefault2", "lenet.tir", defaultOn(2), "lenet.default2.tir"},
      // Mixed precision with gradients reduced in bf16: casts, bf16 buckets, f32 updates.
      {"LenetBf16Default2Bf16AllReduce", "lenet.tir", bf16On(2, true),
       "lenet.bf16_default2_bf16_allreduce.tir"},
      // reduce_scatter, packed shards, sgd_update_shard, all_gather, sharded momentum.
      {"LenetSharded3", "lenet.tir", shardedOn(3), "lenet.sharded3.tir"},
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

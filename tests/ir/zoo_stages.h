#pragma once

// Zoo models at each stage of the default pipeline, shared by the round-trip and the
// verifier tests. Passes run one at a time and without the PassManager's verification,
// so that the tests themselves decide what is checked at each stage.

#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ir/ir.h"
#include "passes/pipeline.h"
#include "tests/test_util.h"

namespace tandem::testing {

/// One zoo model configuration the IR tests run through the pipeline.
struct ZooCase {
  std::string model;
  int64_t batch = 8;
  int devices = 2;
  double momentum = 0;  // > 0 adds optimizer variables (momentum buffers)
  bool bf16 = false;    // mixed precision (the mixed-precision pass runs first)
  std::string optimizer = "sgd";  // or adamw (moments and update counts as variables)
  bool shard = false;             // shard-weight-update (sharded optimizer state)
  int64_t groups = 1;             // --allreduce-groups (hierarchical buckets)
};

/// How GoogleTest shows a case (also in ctest's test names): "resnet50 b8 x2".
inline void PrintTo(const ZooCase& c, std::ostream* os) {
  *os << c.model << " b" << c.batch << " x" << c.devices << (c.bf16 ? " bf16" : "")
      << (c.optimizer != "sgd" ? " " + c.optimizer : "") << (c.shard ? " sharded" : "")
      << (c.groups > 1 ? absl::StrCat(" groups", c.groups) : "");
}

/// "as built" followed by the default pipeline's pass names (mixed-precision only for
/// bf16, shard-weight-update only for sharded cases).
inline std::vector<std::string> stageNames(bool bf16 = false, bool shard = false) {
  std::vector<std::string> out{"built"};
  for (const std::string& p : passes::defaultPassNames())
    if ((bf16 || p != "mixed-precision") && (shard || p != "shard-weight-update") &&
        p != "feed-learning-rate" && p != "clip-grad-norm")
      out.push_back(p);
  return out;
}

/// Every zoo model on 2 devices (small batches for the deep ones) and LeNet on 3 devices
/// with the lessons' batch of 256, which splits unevenly (86/85/85); LeNet and ResNet-18
/// once more in mixed precision.
inline std::vector<ZooCase> zooCases() {
  return {
      {"lenet", 256, 2, 0},
      {"resnet18", 16, 2, 0.9},
      {"resnet34", 8, 2, 0.9},
      {"resnet50", 8, 2, 0.9},
      {"resnet101", 8, 2, 0},
      {"resnet152", 8, 2, 0.9},
      {"lenet", 256, 3, 0.9},
      {"lenet", 256, 2, 0.9, true},
      {"resnet18", 16, 2, 0.9, true},
      {"vit", 8, 2, 0, false, "adamw"},
      {"vit", 9, 3, 0, true, "adamw"},
      {"mlp", 8, 2, 0, false, "adamw"},
      // The sharded weight update: uneven shards (3 devices), SGD momentum, AdamW, bf16.
      {"lenet", 256, 3, 0.9, false, "sgd", true},
      {"resnet18", 16, 2, 0.9, true, "sgd", true},
      {"vit", 9, 3, 0, false, "adamw", true},
      // Sharded within 2 groups of 2 (hybrid), with the state's shard groups.
      {"vit", 8, 4, 0, false, "adamw", true, 2},
  };
}

/// The pipeline configuration of a case: cpu:0..cpu:N-1, with every default pass
/// (group-updates too, which only CUDA devices get unasked).
inline passes::PipelineConfig pipelineConfig(const ZooCase& c) {
  passes::PipelineConfig config;
  config.devices.clear();
  for (int i = 0; i < c.devices; ++i) config.devices.push_back({::tandem::testing::kind("cpu"), i});
  config.optimizer = optimizerWith(
      c.optimizer,
      {{"lr", 0.1}, {"momentum", c.momentum}, {"weight_decay", c.momentum > 0 ? 5e-4 : 0}});
  config.bf16 = c.bf16;
  config.group_updates = true;
  config.shard_updates = c.shard;
  config.allreduce_groups = c.groups;
  return config;
}

/// Builds the case's model and runs the default pipeline's first `stage` passes (stage 0:
/// the model as built). Records a test failure and returns null on any error.
inline std::unique_ptr<ir::Module> buildAtStage(const ZooCase& c, size_t stage) {
  auto m = buildZooModel(c.model, c.batch);
  if (m == nullptr) return nullptr;
  auto passes = passes::parsePipeline(passes::defaultPipeline(pipelineConfig(c)));
  if (!passes.ok()) {
    ADD_FAILURE() << passes.status();
    return nullptr;
  }
  std::vector<std::string> names = stageNames(c.bf16, c.shard);
  if (passes->size() + 1 != names.size() || stage >= names.size()) {
    ADD_FAILURE() << "the default pipeline has " << passes->size() << " passes, stage " << stage;
    return nullptr;
  }
  for (size_t i = 0; i < stage; ++i) {
    ir::Module& module = *m;
    passes::Pass& pass = *(*passes)[i];
    if (pass.name() != names[i + 1]) {
      ADD_FAILURE() << "pass " << i << " is " << pass.name() << ", expected " << names[i + 1];
      return nullptr;
    }
    auto changed = pass.run(module);
    if (!changed.ok()) {
      ADD_FAILURE() << "pass " << pass.name() << ": " << changed.status();
      return nullptr;
    }
  }
  return m;
}

/// Test name suffix of a case and stage: "resnet50_2dev_insert_collectives".
inline std::string caseName(const ZooCase& c, size_t stage) {
  std::string name = absl::StrCat(c.model, "_", c.devices, "dev_", c.bf16 ? "bf16_" : "",
                                  c.shard ? "sharded_" : "",
                                  c.groups > 1 ? absl::StrCat("groups", c.groups, "_") : "",
                                  stageNames(c.bf16, c.shard)[stage]);
  for (char& ch : name)
    if (ch == '-') ch = '_';
  return name;
}

/// Every (case, stage) pair, for INSTANTIATE_TEST_SUITE_P.
inline std::vector<std::pair<ZooCase, size_t>> allCaseStages() {
  std::vector<std::pair<ZooCase, size_t>> out;
  for (const ZooCase& c : zooCases())
    for (size_t s = 0; s < stageNames(c.bf16, c.shard).size(); ++s) out.emplace_back(c, s);
  return out;
}

}  // namespace tandem::testing

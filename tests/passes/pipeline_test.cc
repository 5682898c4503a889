// Pipeline text (parsePipeline, defaultPipeline, the registry) and the PassManager:
// exact error messages, verification after every pass, print-after, timings.

#include "passes/pipeline.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/interfaces.h"
#include "ir/printer.h"
#include "passes/optimizer_options.h"
#include "passes/pass_manager.h"
#include "passes/registry.h"
#include "tests/passes/pass_test_util.h"
#include "tests/test_util.h"

namespace tandem::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string parseError(absl::string_view text) {
  auto p = passes::parsePipeline(text);
  if (p.ok()) return "<parsed>";
  return std::string(p.status().message());
}

std::vector<std::string> passNames(const std::vector<std::unique_ptr<passes::Pass>>& ps) {
  std::vector<std::string> out;
  for (const auto& p : ps) out.emplace_back(p->name());
  return out;
}

TEST(ParsePipeline, UnknownPassListsTheKnownOnes) {
  auto p = passes::parsePipeline("autodiff,fuse-everything");
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(p.status().message(),
            "unknown pass 'fuse-everything' (known: mixed-precision, autodiff, feed-learning-rate, "
            "fuse-conv-bn-relu, fuse-relu-pool, fuse-conv-relu-pool, "
            "replicate, insert-collectives, clip-grad-norm, shard-weight-update, "
            "recompute-bn-relu, dce, schedule, "
            "group-updates, assign-streams, plan-events, assign-layouts, choose-algorithms, "
            "plan-memory)");
  for (const passes::PassInfo& info : passes::registeredPasses())
    EXPECT_THAT(std::string(p.status().message()), HasSubstr(std::string(info.name)));
}

TEST(ParsePipeline, UnknownOptionListsTheKnownOnes) {
  EXPECT_EQ(
      parseError("autodiff{learning-rate=0.1}"),
      "pass autodiff has no option 'learning-rate' (known: optimizer, lr, momentum, weight-decay, "
      "decay)");
  EXPECT_EQ(parseError("replicate{devices=2,count=2}"),
            "pass replicate has no option 'count' (known: devices, weights)");
  EXPECT_EQ(
      parseError("insert-collectives{bucket=1}"),
      "pass insert-collectives has no option 'bucket' (known: bucket-mb, first-bucket-mb, groups, sync-bn, allreduce-dtype)");
  EXPECT_EQ(parseError("dce{x=1}"), "pass dce has no option 'x' (it takes none)");
}

TEST(ParsePipeline, MalformedOptions) {
  EXPECT_EQ(parseError("autodiff{lr}"), "pass autodiff: option 'lr' must be written KEY=VALUE");
  // A device list without brackets: its second device reads as an option.
  EXPECT_EQ(parseError("replicate{devices=cpu:0,cpu:1}"),
            "pass replicate: option 'cpu:1' must be written KEY=VALUE");
  EXPECT_EQ(parseError("autodiff{lr=0.1,lr=0.2}"), "pass autodiff: option 'lr' is given twice");
  EXPECT_EQ(parseError("autodiff{lr=0.1}x"),
            "pass options must end with '}' in 'autodiff{lr=0.1}x'");
  EXPECT_EQ(parseError("autodiff,,dce"), "empty pass name in pipeline 'autodiff,,dce'");
  EXPECT_EQ(parseError("autodiff,"), "empty pass name in pipeline 'autodiff,'");
}

TEST(ParsePipeline, UnbalancedBraces) {
  EXPECT_EQ(parseError("autodiff{lr=0.1"), "unclosed bracket in pipeline 'autodiff{lr=0.1'");
  EXPECT_EQ(parseError("autodiff}"), "unbalanced '}' in pipeline 'autodiff}'");
  EXPECT_EQ(parseError("dce,replicate{devices=[cpu:0,cpu:1}"),
            "unclosed bracket in pipeline 'dce,replicate{devices=[cpu:0,cpu:1}'");
  EXPECT_EQ(parseError("replicate{devices=cpu:0]}"),
            "unbalanced '}' in pipeline 'replicate{devices=cpu:0]}'");
  EXPECT_EQ(parseError("replicate{]devices=2[}"),
            "unbalanced ']' in options of replicate ']devices=2['");
  EXPECT_EQ(parseError("autodiff]"), "unbalanced ']' in pipeline 'autodiff]'");
}

TEST(ParsePipeline, BadNumbers) {
  EXPECT_EQ(parseError("autodiff{lr=abc}"),
            "pass autodiff: option 'lr' must be a number, got 'abc'");
  EXPECT_EQ(parseError("autodiff{lr=1e}"), "pass autodiff: option 'lr' must be a number, got '1e'");
  EXPECT_EQ(parseError("autodiff{lr=0.1.2}"),
            "pass autodiff: option 'lr' must be a number, got '0.1.2'");
  EXPECT_EQ(parseError("autodiff{momentum=}"),
            "pass autodiff: option 'momentum' must be a number, got ''");
  EXPECT_EQ(parseError("insert-collectives{bucket-mb=25MB}"),
            "pass insert-collectives: option 'bucket-mb' must be a number, got '25MB'");
  EXPECT_EQ(parseError("replicate{devices=2,weights=[3,x]}"),
            "pass replicate: option 'weights' must be a list of numbers, got '[3,x]'");
  EXPECT_EQ(parseError("replicate{devices=2,weights=[3,,1]}"),
            "pass replicate: option 'weights' must be a list of numbers, got '[3,,1]'");
  EXPECT_EQ(parseError("replicate{devices=2,weights=}"),
            "pass replicate: option 'weights' must be a list of numbers, got ''");
}

TEST(ParsePipeline, ReplicateNeedsDevices) {
  const char* kNeeds =
      "pass replicate needs option 'devices' (a count such as devices=2, or a list such as "
      "devices=[cpu:0,cpu:1])";
  EXPECT_EQ(parseError("replicate"), kNeeds);
  EXPECT_EQ(parseError("replicate{}"), kNeeds);
  EXPECT_EQ(parseError("replicate{devices=}"), kNeeds);
  EXPECT_EQ(parseError("replicate{weights=[1,1]}"), kNeeds);
}

TEST(ParsePipeline, BadDevices) {
  EXPECT_EQ(parseError("replicate{devices=[cpu:0,gpu:1]}"),
            "pass replicate: option 'devices': unknown device 'gpu:1': the device kind must be "
            "cpu or cuda");
  EXPECT_EQ(parseError("replicate{devices=[cpu:0,cpu:0]}"),
            "pass replicate: option 'devices': device cpu:0 is listed twice in 'cpu:0,cpu:0'");
  EXPECT_EQ(parseError("replicate{devices=0}"),
            "pass replicate: option 'devices': device count 0 is out of range (1 to 1024)");
  EXPECT_EQ(parseError("replicate{devices=[]}"),
            "pass replicate: option 'devices': the device list is empty");
  EXPECT_EQ(parseError("replicate{devices=[cpu:0,]}"),
            "pass replicate: option 'devices': unknown device '': expected KIND:INDEX such as "
            "cpu:0 or cuda:1");
}

TEST(ParsePipeline, WeightsMustMatchTheDevices) {
  EXPECT_EQ(parseError("replicate{devices=2,weights=[1,2,3]}"),
            "pass replicate: option 'weights' has 3 entries for 2 devices");
  EXPECT_EQ(parseError("replicate{devices=[cpu:0,cpu:1,cpu:2],weights=[1]}"),
            "pass replicate: option 'weights' has 1 entries for 3 devices");
  EXPECT_EQ(parseError("replicate{devices=2,weights=[1,0]}"),
            "pass replicate: option 'weights' must all be finite and > 0");
}

TEST(ParsePipeline, SpacesAndEmptyText) {
  auto empty = passes::parsePipeline("  ");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  auto p =
      passes::parsePipeline(" autodiff { lr = 0.2 } , replicate{ devices = [cpu:0, cpu:1] } ,dce ");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(passNames(*p), ElementsAre("autodiff", "replicate", "dce"));
  EXPECT_EQ((*p)[0]->optionsText(), "{lr=0.2,momentum=0,weight-decay=0}");
  EXPECT_EQ((*p)[1]->optionsText(), "{devices=[cpu:0,cpu:1]}");
}

TEST(DefaultPipeline, TextAndOrder) {
  EXPECT_EQ(passes::defaultPipeline({}),
            "autodiff{lr=0.1,momentum=0,weight-decay=0},fuse-conv-bn-relu,fuse-relu-pool,"
            "fuse-conv-relu-pool,replicate{devices=[cpu:0]},"
            "insert-collectives{bucket-mb=25,first-bucket-mb=1},recompute-bn-relu,dce,schedule,"
            "assign-streams,plan-events,assign-layouts,choose-algorithms,plan-memory");
  passes::PipelineConfig config{
      .devices = {{::tandem::testing::kind("cuda"), 0}, {::tandem::testing::kind("cuda"), 1}},
      .weights = {3, 1},
      .optimizer = ir::SgdConfig{.lr = 0.2, .momentum = 0.9, .weight_decay = 0.001},
      .lr_schedule = true,
      .clip_grad_norm = 1.5,
      .shard_updates = true,
      .bucket_mb = 10,
      .first_bucket_mb = 0.5,
      .exact_convolutions = true,
      .bf16 = true,
      .bf16_allreduce = true};
  // No fuse-conv-relu-pool: CUDA has no kernels for its pair (TargetInfo::lacks_kernel).
  std::string text = passes::defaultPipeline(config);
  EXPECT_EQ(text,
            "mixed-precision{dtype=bf16},autodiff{lr=0.2,momentum=0.9,weight-decay=0.001},"
            "feed-learning-rate,fuse-conv-bn-relu,fuse-relu-pool,"
            "replicate{devices=[cuda:0,cuda:1],weights=[3,1]},"
            "insert-collectives{bucket-mb=10,first-bucket-mb=0.5,allreduce-dtype=bf16},"
            "clip-grad-norm{max-norm=1.5},shard-weight-update,recompute-bn-relu,dce,schedule,"
            "group-updates,assign-streams,plan-events,"
            "assign-layouts,choose-algorithms{conv=direct},plan-memory");
  auto p = passes::parsePipeline(text);
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<std::string> cuda_passes = passes::defaultPassNames();
  std::erase(cuda_passes, "fuse-conv-relu-pool");
  EXPECT_EQ(passNames(*p), cuda_passes);
  EXPECT_THAT(passes::defaultPassNames(),
              ElementsAre("mixed-precision", "autodiff", "feed-learning-rate", "fuse-conv-bn-relu",
                          "fuse-relu-pool", "fuse-conv-relu-pool", "replicate",
                          "insert-collectives", "clip-grad-norm", "shard-weight-update",
                          "recompute-bn-relu", "dce", "schedule", "group-updates", "assign-streams",
                          "plan-events", "assign-layouts", "choose-algorithms", "plan-memory"));
  // CUDA devices group the updates unless told not to; CPU devices only when told to.
  config.group_updates = false;
  EXPECT_THAT(passes::defaultPipeline(config), Not(HasSubstr("group-updates")));
  EXPECT_THAT(passes::defaultPipeline({.group_updates = true}),
              HasSubstr(",schedule,group-updates,assign-streams,"));
  // Each pass prints the options it was given: the pipeline text again.
  std::vector<std::string> printed;
  for (const auto& pass : *p) printed.push_back(std::string(pass->name()) + pass->optionsText());
  EXPECT_EQ(absl::StrJoin(printed, ","), text);
}

// autodiff's options are the attributes of the optimizer's update op (ir/ops.td), in its
// order: SGD's momentum, AdamW's betas and eps, each from its config's fields.
TEST(DefaultPipeline, AutodiffTakesTheOptimizersOwnAttributes) {
  auto autodiffText = [&](const ir::OptimizerConfig& optimizer) {
    const std::string text = passes::defaultPipeline({.optimizer = optimizer});
    return text.substr(0, text.find("},") + 1);
  };
  EXPECT_EQ(autodiffText(ir::SgdConfig{.lr = 0.2, .momentum = 0.9, .weight_decay = 0.05}),
            "autodiff{lr=0.2,momentum=0.9,weight-decay=0.05}");
  EXPECT_EQ(autodiffText(ir::AdamwConfig{
                .lr = 0.2, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-7, .weight_decay = 0.05}),
            "autodiff{optimizer=adamw,lr=0.2,beta1=0.8,beta2=0.99,eps=1e-07,weight-decay=0.05}");
  // A config's defaults are its op's presets: PyTorch's (SGD's lr, which PyTorch leaves to
  // the user, 0.1).
  EXPECT_EQ(autodiffText(ir::AdamwConfig{}),
            "autodiff{optimizer=adamw,lr=0.001,beta1=0.9,beta2=0.999,eps=1e-08,weight-decay=0.01}");
  EXPECT_EQ(parseError("autodiff{optimizer=rmsprop}"),
            "pass autodiff: option 'optimizer' must name an optimizer update op (adamw, sgd, or "
            "their ops such as sgd_update), got 'rmsprop'");
}

// The typed configs and the op table agree: a config per optimizer's single form, whose
// fields are its op's attributes in order, each defaulting to the attribute's preset; a
// value set by name lands in the field of that name.
TEST(OptimizerConfig, IsItsOpsDeclaration) {
  for (const ir::OpInfo& info : ir::allOps()) {
    if (info.optimizer == nullptr || info.optimizer->grouped_of || info.optimizer->sharded_of)
      continue;
    absl::StatusOr<ir::OptimizerConfig> config = passes::optimizerConfig(info.op);
    ASSERT_TRUE(config.ok()) << info.name << ": " << config.status();
    EXPECT_EQ(passes::optimizerOp(*config), info.op);
    std::vector<std::pair<std::string, double>> presets;
    for (const ir::AttrSpec& a : info.attrs) presets.emplace_back(a.name, a.preset.value_or(-1));
    EXPECT_EQ(passes::hyperParameters(*config), presets) << info.name;
    EXPECT_TRUE(passes::setHyperParameter(*config, "lr", 0.25));
    EXPECT_EQ(passes::hyperParameters(*config)[0], (std::pair<std::string, double>{"lr", 0.25}));
    EXPECT_FALSE(passes::setHyperParameter(*config, "no_such_attribute", 1));
  }
  EXPECT_FALSE(passes::optimizerConfig(ir::Op::kRelu).ok());
  ir::OptimizerConfig sgd = ir::SgdConfig{};
  EXPECT_FALSE(passes::setHyperParameter(sgd, "beta1", 0.5));  // AdamW's, not SGD's
}

// autodiff's help (tandem opt --help) is written from the optimizer ops' declarations:
// each optimizer's own options and defaults (AdamW's lr is 1e-3, not SGD's 0.1).
TEST(Registry, AutodiffOptionsAreEachOptimizersAttributes) {
  const auto& passes = passes::registeredPasses();
  auto autodiff = std::find_if(passes.begin(), passes.end(),
                               [](const passes::PassInfo& p) { return p.name == "autodiff"; });
  ASSERT_NE(autodiff, passes.end());
  EXPECT_EQ(autodiff->options,
            "optimizer=sgd (default)|adamw; sgd: lr=0.1, momentum=0, weight-decay=0; adamw: "
            "lr=0.001, beta1=0.9, beta2=0.999, eps=1e-08, weight-decay=0.01");
}

TEST(DefaultPipeline, KeepsNumbersExact) {
  // The pipeline text must not round the user's learning rate (6 significant digits
  // would turn 0.1234567 into 0.123457).
  passes::PipelineConfig config{.optimizer =
                                    ir::SgdConfig{.lr = 0.1234567, .weight_decay = 1.0 / 3}};
  std::string text = passes::defaultPipeline(config);
  auto m = buildZooModel("lenet", 8);
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(runPipeline(*m, text).ok()) << text;
  auto updates = nodesWithOp(*m->graph(ir::kTrainGraph), ir::Op::kSgdUpdate);
  ASSERT_FALSE(updates.empty());
  for (const ir::Node* u : updates) {
    EXPECT_EQ(u->floatAttr("lr"), 0.1234567) << text;
    EXPECT_EQ(u->floatAttr("weight_decay"), 1.0 / 3) << text;
  }
}

TEST(Registry, EveryDefaultPassIsRegisteredOnce) {
  std::vector<std::string> names;
  for (const passes::PassInfo& info : passes::registeredPasses()) {
    names.emplace_back(info.name);
    EXPECT_FALSE(info.summary.empty()) << info.name;
    EXPECT_NE(info.create, nullptr) << info.name;
  }
  EXPECT_EQ(names, passes::defaultPassNames());
  passes::PassOptions opts("nope", {});
  EXPECT_EQ(passes::createPass("nope", opts).status().code(), absl::StatusCode::kNotFound);
}

/// A deliberately wrong pass: gives the first relu of @train_step a wrong result type.
class BreakTypes final : public passes::Pass {
 public:
  absl::string_view name() const override { return "break-types"; }
  absl::StatusOr<bool> run(ir::Module& m) override {
    for (const auto& n : m.graph(ir::kTrainGraph)->nodes())
      if (n->op() == ir::Op::kRelu) {
        n->result()->setType({ir::DType::kF32, {1}});
        return true;
      }
    return false;
  }
};

/// A pass that fails with its own error.
class Fails final : public passes::Pass {
 public:
  absl::string_view name() const override { return "fails"; }
  absl::StatusOr<bool> run(ir::Module&) override {
    return absl::InternalError("fails: on purpose");
  }
};

TEST(PassManager, VerifiesAfterEachPass) {
  auto m = parseGoldenInput("lenet.tir");
  ASSERT_NE(m, nullptr);
  passes::PassManager pm;
  pm.add(std::make_unique<BreakTypes>());
  ASSERT_TRUE(pm.addPipeline("dce").ok());
  absl::Status s = pm.run(*m);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), StartsWith("after break-types: verifier: "));
  EXPECT_EQ(s.message(),
            "after break-types: verifier: graph @train_step: %relu (relu): result %relu has type "
            "f32[1], expected f32[256,20,26,26]");
  // The run stopped at the broken pass.
  ASSERT_EQ(pm.timings().size(), 1u);
  EXPECT_EQ(pm.timings()[0].pass, "break-types");
}

TEST(PassManager, VerificationCanBeTurnedOff) {
  auto m = parseGoldenInput("lenet.tir");
  ASSERT_NE(m, nullptr);
  passes::PassManager pm({.verify = false});
  pm.add(std::make_unique<BreakTypes>());
  EXPECT_TRUE(pm.run(*m).ok());
}

TEST(PassManager, PassErrorsStopTheRun) {
  auto m = parseGoldenInput("lenet.tir");
  ASSERT_NE(m, nullptr);
  std::vector<std::string> printed;
  passes::PassManager pm(
      {.print_after = {"*"}, .on_print = [&](const passes::Pass& p, const ir::Module&) {
         printed.emplace_back(p.name());
       }});
  ASSERT_TRUE(pm.addPipeline("autodiff").ok());
  pm.add(std::make_unique<Fails>());
  ASSERT_TRUE(pm.addPipeline("dce").ok());
  absl::Status s = pm.run(*m);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "fails: on purpose");
  EXPECT_THAT(printed, ElementsAre("autodiff"));
  ASSERT_EQ(pm.timings().size(), 1u);
}

TEST(PassManager, BadPipelineAddsNothing) {
  passes::PassManager pm;
  EXPECT_EQ(
      pm.addPipeline("autodiff,nope").message(),
      "unknown pass 'nope' (known: mixed-precision, autodiff, feed-learning-rate, "
      "fuse-conv-bn-relu, fuse-relu-pool, fuse-conv-relu-pool, replicate, "
      "insert-collectives, clip-grad-norm, shard-weight-update, recompute-bn-relu, dce, schedule, "
      "group-updates, assign-streams, plan-events, assign-layouts, choose-algorithms, "
      "plan-memory)");
  EXPECT_EQ(pm.size(), 0u);
}

/// Runs the 2-device default pipeline over LeNet and records each print-after call.
struct Printed {
  std::string pass;
  bool replicated;
  size_t nodes;
  std::string text;
};

std::vector<Printed> runPrinting(std::vector<std::string> print_after, passes::PassManager* out) {
  std::vector<Printed> printed;
  auto m = parseGoldenInput("lenet.tir");
  if (m == nullptr) return printed;
  passes::PipelineConfig config;
  config.devices = {{::tandem::testing::kind("cpu"), 0}, {::tandem::testing::kind("cpu"), 1}};
  passes::PassManager pm({.print_after = std::move(print_after),
                          .on_print = [&](const passes::Pass& p, const ir::Module& mod) {
                            printed.push_back({std::string(p.name()), mod.isReplicated(),
                                               passes::countNodes(mod), canonical(mod)});
                          }});
  EXPECT_TRUE(pm.addPipeline(passes::defaultPipeline(config)).ok());
  EXPECT_TRUE(pm.run(*m).ok());
  if (out != nullptr) *out = std::move(pm);
  return printed;
}

TEST(PassManager, PrintAfterNamedPass) {
  auto printed = runPrinting({"replicate"}, nullptr);
  ASSERT_EQ(printed.size(), 1u);
  EXPECT_EQ(printed[0].pass, "replicate");
  EXPECT_TRUE(printed[0].replicated);
  // The module as replicate left it: what autodiff, the fusions then replicate alone make.
  auto replicated = parseGoldenInput("lenet.tir");
  ASSERT_NE(replicated, nullptr);
  ASSERT_TRUE(
      runPipeline(*replicated,
                  "autodiff,fuse-relu-pool,fuse-conv-relu-pool,replicate{devices=[cpu:0,cpu:1]}")
          .ok());
  EXPECT_EQ(printed[0].text, canonical(*replicated));

  printed = runPrinting({"autodiff", "dce"}, nullptr);
  ASSERT_EQ(printed.size(), 2u);
  EXPECT_EQ(printed[0].pass, "autodiff");
  EXPECT_FALSE(printed[0].replicated);
  EXPECT_EQ(printed[1].pass, "dce");

  EXPECT_TRUE(runPrinting({}, nullptr).empty());
  // A name that is not a pass of the pipeline is an error, not a silent no-print.
  passes::PassManager pm({.print_after = {"fuse-conv-bn-relu"}, .on_print = [](auto&, auto&) {}});
  ASSERT_TRUE(pm.addPipeline("autodiff,dce").ok());
  auto m = parseGoldenInput("lenet.tir");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(pm.run(*m).message(),
            "'fuse-conv-bn-relu' is not a pass of the pipeline (autodiff, dce, or *)");
}

TEST(PassManager, PrintAfterEveryPassAndTimings) {
  passes::PassManager pm;
  auto printed = runPrinting({"*"}, &pm);
  std::vector<std::string> names;
  for (const Printed& p : printed) names.push_back(p.pass);
  // Every default pass but mixed-precision, which runs only for bf16, feed-learning-rate,
  // only under a schedule, and group-updates, which runs for CUDA devices.
  std::vector<std::string> f32_passes = passes::defaultPassNames();
  f32_passes.erase(f32_passes.begin());
  std::erase(f32_passes, "feed-learning-rate");
  std::erase(f32_passes, "clip-grad-norm");
  std::erase(f32_passes, "shard-weight-update");
  std::erase(f32_passes, "group-updates");
  EXPECT_EQ(names, f32_passes);

  const auto& timings = pm.timings();
  ASSERT_EQ(timings.size(), printed.size());
  std::vector<bool> changed;
  for (size_t i = 0; i < timings.size(); ++i) {
    EXPECT_EQ(timings[i].pass, printed[i].pass);
    EXPECT_GE(timings[i].seconds, 0);
    EXPECT_EQ(timings[i].nodes_after, printed[i].nodes) << timings[i].pass;
    changed.push_back(timings[i].changed);
  }
  // LeNet has no batch norm to fuse or recompute, but two relu -> avg_pool2d to fuse and
  // its first convolution with the first of them (fuse-conv-relu-pool); dce
  // finds nothing to remove in its step; schedule moves the loss reductions before the
  // updates; the plan passes each add their part of the execution plan (assign-layouts its
  // part, though LeNet's 20 and 50 channels keep nothing blocked; choose-algorithms its
  // convolutions' algorithms).
  EXPECT_THAT(changed, ElementsAre(true, false, true, true, true, true, false, false, true, true,
                                   true, true, true, true));

  std::vector<std::string> lines = absl::StrSplit(pm.timingReport(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 1 + timings.size() + 1);  // header, passes, total
  EXPECT_THAT(lines[0], StartsWith("pass"));
  for (size_t i = 0; i < timings.size(); ++i)
    EXPECT_THAT(lines[1 + i], StartsWith(timings[i].pass));
  EXPECT_THAT(lines.back(), StartsWith("total"));
}

TEST(PassManager, TimingsAreForTheLastRun) {
  passes::PassManager pm;
  ASSERT_TRUE(pm.addPipeline("dce,dce").ok());
  auto m = parseGoldenInput("lenet.tir");
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(pm.run(*m).ok());
  ASSERT_TRUE(pm.run(*m).ok());
  EXPECT_EQ(pm.timings().size(), 2u);
  for (const auto& t : pm.timings()) {
    EXPECT_EQ(t.pass, "dce");
    EXPECT_FALSE(t.changed);
    EXPECT_EQ(t.nodes_after, passes::countNodes(*m));
  }
}

}  // namespace
}  // namespace tandem::testing

// `tandem dump`: the printed IR parses back byte-identically, and every output format,
// --after, --graph and --output do what they say.

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "tests/tools/cli_helpers.h"

namespace tandem::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

/// Runs tandem and expects success with nothing on standard error.
std::string runOk(const std::vector<std::string>& args, const std::string& stdin_text = "") {
  CommandResult r = runTandem(args, stdin_text);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  return r.out;
}

std::set<std::string> bucketIds(const std::string& text) {
  std::set<std::string> ids;
  for (size_t pos = text.find("bucket="); pos != std::string::npos;
       pos = text.find("bucket=", pos + 1))
    ids.insert(text.substr(pos, text.find_first_of(",}", pos) - pos));
  return ids;
}

TEST(DumpTest, Resnet18OnFourDevicesParsesBackByteIdentically) {
  std::string dump = runOk({"dump", "--model", "resnet18", "--devices", "cpu:0,cpu:1,cpu:2,cpu:3",
                            "--batch", "256", "--format", "text"});
  EXPECT_THAT(dump, StartsWith("module @resnet18 devices=[cpu:0, cpu:1, cpu:2, cpu:3] {\n"));
  EXPECT_THAT(dump, AllOf(HasSubstr(" = split(%x) {axis=0, sizes=[64,64,64,64]"),
                          HasSubstr(" = broadcast("), HasSubstr(" = all_reduce("),
                          HasSubstr("loc(\"stage2.block0.conv1\", \"resnet.cc:")));
  // Gradients in several buckets (plus the loss and correct-count reductions).
  EXPECT_GE(bucketIds(dump).size(), 4u) << "buckets: " << bucketIds(dump).size();

  // An empty pipeline only parses, verifies and prints: from standard input...
  std::string from_stdin = runOk({"opt", "-"}, dump);
  EXPECT_TRUE(from_stdin == dump) << "opt - differs from the dump";
  // ...and from a file.
  TempDir dir;
  std::string from_file = runOk({"opt", dir.write("resnet18.tir", dump), "--passes", ""});
  EXPECT_TRUE(from_file == dump) << "opt FILE differs from the dump";
}

// --memory: one row per graph and device with the planned arena, the live peak and
// what no reuse would take; reuse must make the training arena smaller than no reuse.
TEST(DumpTest, MemoryPrintsTheArenaOfEveryGraphAndDevice) {
  std::string out =
      runOk({"dump", "--model", "lenet", "--devices", "2", "--batch", "256", "--memory"});
  EXPECT_THAT(out, StartsWith("graph"));
  for (const char* graph : {"init", "train_step", "eval_step"})
    for (const char* device : {"cpu:0", "cpu:1"})
      EXPECT_THAT(
          out, HasSubstr(std::string(graph) + std::string(12 - strlen(graph), ' ') + " " + device))
          << out;
  double arena = 0, peak = 0, unshared = 0;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (!absl::StartsWith(line, "train_step   cpu:0")) continue;
    ASSERT_EQ(std::sscanf(std::string(line).c_str(), "train_step cpu:0 %lf MiB %lf MiB %lf MiB",
                          &arena, &peak, &unshared),
              3)
        << line;
  }
  EXPECT_GE(arena, peak);
  EXPECT_LT(arena, unshared);
  // LeNet at 128 images per device: the first conv's output alone is 6.6 MiB.
  EXPECT_GT(peak, 6.6);
}

// Issue 27's bar: --memory's per-device table shows the sharded update's optimizer state
// (vit's AdamW moments and counts) at most 0.26x of the replicated one on 4 devices, the
// parameters unchanged, and the gradients the update reads a quarter.
TEST(DumpTest, MemoryShowsTheShardedStatePerDevice) {
  auto perDevice = [](const std::string& out) {
    std::vector<std::vector<double>> rows;  // parameters, gradients, optimizer (MiB)
    for (absl::string_view line : absl::StrSplit(out, '\n')) {
      if (!absl::StartsWith(line, "variables")) continue;
      char device[16] = {};
      double p = 0, g = 0, o = 0;
      EXPECT_EQ(std::sscanf(std::string(line).c_str(), "variables %15s %lf MiB %lf MiB %lf MiB",
                            device, &p, &g, &o),
                4)
          << line;
      rows.push_back({p, g, o});
    }
    return rows;
  };
  const std::vector<std::string> args = {"dump", "--model", "vit", "--devices", "4", "--memory"};
  std::vector<std::string> sharded = args;
  sharded.push_back("--shard-updates");
  const auto plain = perDevice(runOk(args)), shards = perDevice(runOk(sharded));
  ASSERT_EQ(plain.size(), 4u);
  ASSERT_EQ(shards.size(), 4u);
  for (size_t d = 0; d < 4; ++d) {
    EXPECT_GT(plain[d][2], 0);
    EXPECT_LE(shards[d][2], 0.26 * plain[d][2]) << d;
    EXPECT_EQ(shards[d][0], plain[d][0]) << d;
    EXPECT_LE(shards[d][1], 0.26 * plain[d][1]) << d;
  }
}

// Issue 27's bar: resnet18 on 4 devices with --shard-updates reduces its gradients by
// reduce_scatter and gathers the stepped weights by all_gather; no all_reduce is left but
// those of the returned loss and correct count.
TEST(DumpTest, ShardedUpdatesShowReduceScatterAndAllGather) {
  const std::string summary = runOk({"dump", "--model", "resnet18", "--devices", "4", "--batch",
                                     "16", "--shard-updates", "--format", "summary"});
  EXPECT_THAT(summary, HasSubstr("  reduce_scatter bucket 0: ")) << summary;
  EXPECT_THAT(summary, HasSubstr("  all_gather bucket 0: ")) << summary;
  size_t all_reduces = 0;
  for (absl::string_view line : absl::StrSplit(summary, '\n'))
    if (absl::StartsWith(line, "  all_reduce bucket")) {
      ++all_reduces;
      EXPECT_THAT(std::string(line), HasSubstr("(returned value)"));
    }
  EXPECT_EQ(all_reduces, 4u) << summary;  // loss and correct count, train and eval steps
  const std::string text = runOk({"dump", "--model", "resnet18", "--devices", "4", "--batch", "16",
                                  "--shard-updates", "--graph", "train_step"});
  EXPECT_THAT(text, HasSubstr(" = reduce_scatter("));
  EXPECT_THAT(text, HasSubstr(" = all_gather("));
  EXPECT_THAT(text, HasSubstr(" = sgd_update_shard("));
  EXPECT_THAT(text, Not(HasSubstr("sgd_update(")));
  EXPECT_THAT(text, Not(HasSubstr(".grad.sum.")));  // no all-reduced gradient
}

TEST(DumpTest, DeviceCountMeansCpuDevices) {
  EXPECT_EQ(runOk({"dump", "--model", "lenet", "--devices", "3", "--batch", "30"}),
            runOk({"dump", "--model", "lenet", "--devices", "cpu:0,cpu:1,cpu:2", "--batch", "30"}));
}

TEST(DumpTest, CanonicalOmitsLocations) {
  std::string with = runOk({"dump", "--model", "lenet", "--devices", "2", "--batch", "64"});
  std::string without =
      runOk({"dump", "--model", "lenet", "--devices", "2", "--batch", "64", "--canonical"});
  EXPECT_THAT(with, HasSubstr(" loc(\"conv2\", \"lenet.cc:"));
  EXPECT_THAT(without, Not(HasSubstr("loc(")));
  EXPECT_EQ(runOk({"opt", "-", "--canonical"}, with), without);
}

TEST(DumpTest, DotRendersWithGraphviz) {
  std::string dot = runOk(
      {"dump", "--model", "lenet", "--devices", "cpu:0,cpu:1", "--batch", "64", "--format", "dot"});
  EXPECT_THAT(dot, StartsWith("digraph \"train_step\" {"));
  EXPECT_THAT(dot, AllOf(HasSubstr("label=\"cpu:0\""), HasSubstr("label=\"cpu:1\""),
                         HasSubstr("all_reduce")));
  const std::string graphviz = "/usr/bin/dot";
  TANDEM_NEED_INSTALLED(testing::whyNoGraphviz());
  TempDir dir;
  CommandResult svg = runProgram(graphviz, {"-Tsvg", dir.write("lenet.dot", dot)});
  EXPECT_EQ(svg.exit_code, 0) << svg.err;
  EXPECT_EQ(svg.err, "");
  EXPECT_THAT(svg.out, AllOf(HasSubstr("<svg"), HasSubstr("</svg>")));
}

TEST(DumpTest, SummaryShowsParametersSplitsAndBuckets) {
  std::string summary = runOk({"dump", "--model", "lenet", "--devices", "cpu:0,cpu:1", "--batch",
                               "256", "--format", "summary"});
  EXPECT_THAT(summary,
              StartsWith("model lenet: 129,068 parameters (0.49 MiB) in 8 variables, 0 buffers, "
                         "8 optimizer variables\ndevices: [cpu:0, cpu:1]\n"));  // momentum 0.9
  EXPECT_THAT(summary,
              AllOf(HasSubstr("\ngraph @train_step: "), HasSubstr("\ngraph @eval_step: "),
                    HasSubstr("  split %x f32[256,1,28,28] -> 128/128 over [cpu:0, cpu:1]\n"),
                    HasSubstr("  all_reduce bucket 0: 8 tensors, 0.49 MiB per device")));
}

// 1024 devices, the most the CLI takes (ir::kMaxDevices), with no --batch: one example per
// device, and a summary that shows the ends of long lists.
TEST(DumpTest, SummaryOfAThousandDevices) {
  std::string summary =
      runOk({"dump", "--model", "lenet", "--devices", "1024", "--format", "summary"});
  EXPECT_THAT(summary, HasSubstr("devices: [cpu:0, cpu:1, ..., cpu:1023] (1024 devices)\n"));
  EXPECT_THAT(summary, HasSubstr("  split %x f32[1024,1,28,28] -> 1 each over [cpu:0, cpu:1, "
                                 "..., cpu:1023] (1024 devices)\n"));
}

TEST(DumpTest, AfterReplicateHasReplicasButNoCollectives) {
  std::string text = runOk({"dump", "--model", "lenet", "--devices", "2", "--batch", "64",
                            "--after", "replicate", "--canonical"});
  EXPECT_THAT(text, StartsWith("module @lenet devices=[cpu:0, cpu:1] {"));
  EXPECT_THAT(text, AllOf(HasSubstr("%pool1.1, %pool1.mask.1 = conv2d_relu_avg_pool("),
                          HasSubstr("sgd_update(")));
  EXPECT_THAT(text, AllOf(Not(HasSubstr("all_reduce(")), Not(HasSubstr("split(")),
                          Not(HasSubstr("broadcast("))));
  EXPECT_EQ(runOk({"opt", "-", "--canonical"}, text), text);
}

// CUDA devices get one sgd_update_group per device and bucket (the dump compiles for any
// device kind); --group-updates on asks for it on CPU devices, off leaves it out.
TEST(DumpTest, GroupedUpdatesForCudaDevicesAndOnRequest) {
  for (auto [devices, flag, grouped] :
       {std::tuple{"cuda:0,cuda:1", "auto", true}, std::tuple{"cuda:0,cuda:1", "off", false},
        std::tuple{"cpu:0,cpu:1", "auto", false}, std::tuple{"cpu:0,cpu:1", "on", true}}) {
    SCOPED_TRACE(std::string(devices) + " " + flag);
    std::string text = runOk({"dump", "--model", "lenet", "--devices", devices, "--batch", "64",
                              "--group-updates", flag, "--canonical"});
    EXPECT_EQ(text.find("sgd_update_group(") != std::string::npos, grouped);
    EXPECT_EQ(text.find("  sgd_update(") != std::string::npos, !grouped);
    EXPECT_EQ(runOk({"opt", "-", "--canonical"}, text), text);
  }
}

// --devices cuda:0,cuda:0: two logical devices on GPU 0, cuda:0 and cuda:0.1 in the IR;
// the text parses back.
TEST(DumpTest, LogicalDevicesOnOneGpu) {
  std::string text = runOk(
      {"dump", "--model", "lenet", "--devices", "cuda:0,cuda:0", "--batch", "64", "--canonical"});
  EXPECT_THAT(text, StartsWith("module @lenet devices=[cuda:0, cuda:0.1] {"));
  EXPECT_THAT(text, AllOf(HasSubstr(") {lr=0.1, momentum=0.9, weight_decay=0} @cuda:0.1 plan{"),
                          HasSubstr("devices=[cuda:0, cuda:0.1]}")));
  EXPECT_EQ(runOk({"opt", "-", "--canonical"}, text), text);
}

TEST(DumpTest, AfterNoneIsTheModelAsBuilt) {
  std::string text =
      runOk({"dump", "--model", "lenet", "--batch", "64", "--after", "none", "--canonical"});
  EXPECT_THAT(text, StartsWith("module @lenet {"));
  EXPECT_THAT(text, AllOf(Not(HasSubstr("sgd_update(")), Not(HasSubstr("@cpu:")),
                          HasSubstr("graph @train_step(%x: f32[64,1,28,28], %y: i32[64]) {")));
}

// The bar of the fusion issue: a ResNet-18 dump has no batch_norm or relu node left that
// fuse-conv-bn-relu could have fused, each fused node names the layers it absorbed, and
// --no-fuse shows the layers again.
TEST(DumpTest, FusedResNet18HasNoSeparateBatchNormOrRelu) {
  std::string fused = runOk({"dump", "--model", "resnet18", "--devices", "cpu:0,cpu:1",
                             "--batch", "8", "--format", "text"});
  for (const char* op : {"= batch_norm(", "= relu(", "= relu_backward(", "= batch_norm_backward("})
    EXPECT_THAT(fused, Not(HasSubstr(op))) << op;
  EXPECT_THAT(fused, AllOf(HasSubstr("= conv2d_stats("), HasSubstr("= batch_norm_apply("),
                           HasSubstr("= conv2d_bias_act(")));
  EXPECT_THAT(fused, HasSubstr("loc(\"stage1.block0.conv2 + stage1.block0.bn2 + "
                               "stage1.block0.add + stage1.block0.relu_1\""));
  std::string unfused = runOk({"dump", "--model", "resnet18", "--devices", "cpu:0,cpu:1",
                               "--batch", "8", "--format", "text", "--no-fuse"});
  EXPECT_THAT(unfused, AllOf(HasSubstr("= batch_norm("), HasSubstr("= relu("),
                             Not(HasSubstr("conv2d_stats("))));
}

// recompute-bn-relu is in the default pipeline with fusion; --no-recompute drops it.
// The bar of the mixed-precision issue: bf16 convolutions reading f32 parameters, f32
// batch-norm statistics and an f32 gradient all_reduce, all visible in the dump.
TEST(DumpTest, Bf16ShowsBf16ConvolutionsWithF32ParametersStatisticsAndReduction) {
  std::string dump = runOk({"dump", "--model", "resnet18", "--devices", "cpu:0,cpu:1",
                            "--precision", "bf16", "--format", "text", "--canonical"});
  for (const char* line : {
           "%x.bf16.0 = cast(%x.0) {dtype=bf16} @cpu:0 : bf16[128,1,28,28]",
           // conv2d_stats: bf16 input and output, f32 master weights, f64 statistics.
           "= conv2d_stats(%stage1.block0.relu.0, %stage1.block0.conv2.w.0, "
           "%stage1.block0.conv2.b.0) {stride=1, pad=1} @cpu:0 : bf16[128,64,28,28], f64[3,64]",
           "%stage1.block0.conv2.w.0 = param() {var=@stage1.block0.conv2.w} @cpu:0 : "
           "f32[64,64,3,3]",
           // batch_norm_apply: bf16 activations, f32 saved mean and 1/std.
           "{momentum=0.1, eps=1e-05, relu=true} @cpu:0 : bf16[128,64,28,28], f32[64], f32[64]",
           "%head.fc.f32.0 = cast(%head.fc.0) {dtype=f32} @cpu:0 : f32[128,10]"}) {
    EXPECT_TRUE(absl::StrContains(dump, line)) << line;
  }
  EXPECT_FALSE(absl::StrContains(dump, "param() {var=@stem.conv.w} @cpu:0 : bf16"));
  // Every gradient all_reduce is f32 ...
  for (absl::string_view line : absl::StrSplit(dump, '\n')) {
    if (absl::StrContains(line, "= all_reduce(")) {
      EXPECT_FALSE(absl::StrContains(line, "bf16")) << line;
    }
  }
  // ... unless asked for bf16 on the wire.
  std::string wire = runOk({"dump", "--model", "resnet18", "--devices", "cpu:0,cpu:1",
                            "--precision", "bf16", "--allreduce-dtype", "bf16", "--format",
                            "text"});
  EXPECT_TRUE(absl::StrContains(wire, "{op=sum, bucket=0, devices=[cpu:0, cpu:1]} : bf16["));
}

TEST(DumpTest, PrecisionIsCheckedLikeEveryFlag) {
  EXPECT_TRUE(isUsageError(runTandem({"dump", "--model", "lenet", "--precision", "f16"}),
                           {"--precision", "'f16'", "f32 or bf16"}));
  EXPECT_TRUE(isUsageError(runTandem({"dump", "--model", "lenet", "--allreduce-dtype", "int8"}),
                           {"--allreduce-dtype", "'int8'"}));
}

TEST(DumpTest, NoRecomputeKeepsTheForwardOutputs) {
  const std::vector<std::string> base = {"dump", "--model", "resnet18", "--batch", "8",
                                         "--graph", "train_step", "--canonical"};
  std::string with = runOk(base);
  std::vector<std::string> args = base;
  args.push_back("--no-recompute");
  std::string without = runOk(args);
  EXPECT_THAT(with, HasSubstr("%stage1.block0.relu.recomputed.0 = batch_norm_recompute("));
  EXPECT_THAT(without, Not(HasSubstr("batch_norm_recompute(")));
}

TEST(DumpTest, GraphEvalStepPrintsOnlyThatGraphInInferenceMode) {
  std::string text = runOk({"dump", "--model", "resnet18", "--devices", "2", "--batch", "8",
                            "--graph", "eval_step", "--canonical", "--no-fuse"});
  EXPECT_THAT(text, StartsWith("graph @eval_step(%x: f32[8,1,28,28], %y: i32[8]) {\n"));
  EXPECT_THAT(text, AllOf(HasSubstr("{training=false,"), Not(HasSubstr("training=true")),
                          Not(HasSubstr("graph @train_step")), Not(HasSubstr("module @")),
                          Not(HasSubstr("sgd_update("))));
}

TEST(DumpTest, OutputFlagWritesTheFile) {
  TempDir dir;
  std::string path = dir.file("lenet.tir");
  std::string out = runOk({"dump", "--model", "lenet", "--batch", "16", "-o", path});
  EXPECT_EQ(out, "");
  EXPECT_EQ(readFile(path), runOk({"dump", "--model", "lenet", "--batch", "16"}));
}

TEST(DumpTest, HelpMentionsEveryFlag) {
  CommandResult top = runTandem({"--help"});
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_THAT(top.out, AllOf(HasSubstr("dump"), HasSubstr("opt"), HasSubstr("--help")));

  CommandResult dump = runTandem({"dump", "--help"});
  EXPECT_EQ(dump.exit_code, 0);
  EXPECT_EQ(dump.err, "");
  for (const char* flag :
       {"--model",  "--devices",   "--batch",     "--after",           "--format",    "--graph",
        "--output", "--lr",        "--momentum",  "--weight-decay",    "--optimizer", "--beta1",
        "--beta2",  "--eps",       "--bucket-mb", "--first-bucket-mb", "--split",     "--canonical",
        "--timing", "--no-verify", "resnet152",   "insert-collectives"})
    EXPECT_THAT(dump.out, HasSubstr(flag));

  CommandResult opt = runTandem({"opt", "--help"});
  EXPECT_EQ(opt.exit_code, 0);
  EXPECT_EQ(opt.err, "");
  for (const char* flag : {"--passes", "--format", "--graph", "--output", "--print-after",
                           "--canonical", "--timing", "--no-verify", "replicate{devices"})
    EXPECT_THAT(opt.out, HasSubstr(flag));
}

TEST(DumpTest, TimingGoesToStandardError) {
  CommandResult r = runTandem({"dump", "--model", "lenet", "--batch", "16", "--timing"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.err, AllOf(HasSubstr("autodiff"), HasSubstr("replicate"), HasSubstr("total")));
  EXPECT_THAT(r.out, StartsWith("module @lenet"));
}

}  // namespace
}  // namespace tandem::testing

// What a new user meets in the first hour, as a table: every bad input tried against the
// CLI with the exact line it must give (after "tandem: ") and its exit code. Nothing on
// standard output, exactly one line on standard error, never a crash, never exit 0.
// "$TMP" stands for a scratch directory and "$DATA" for a small Fashion-MNIST-shaped data
// set (100 training and 50 test images) the test writes there.

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "tests/tools/cli_helpers.h"

namespace tandem::testing {
namespace {

struct BadInput {
  std::vector<std::string> args;
  std::string message;  // the whole line after "tandem: "
  int exit_code = 2;
};


class BadInputTable : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = tmp_dir_.file("");
    tmp_.pop_back();
    data_ = data_dir_.file("");
    data_.pop_back();
    writeIdxSplit(data_dir_, "train", 100);
    writeIdxSplit(data_dir_, "t10k", 50);
  }
  std::string expand(const std::string& s) const {
    return absl::StrReplaceAll(s, {{"$TMP", tmp_}, {"$DATA", data_}});
  }
  void check(const std::vector<BadInput>& table) {
    for (const BadInput& row : table) {
      std::vector<std::string> args;
      for (const std::string& a : row.args) args.push_back(expand(a));
      CommandResult r = runTandem(args);
      std::string shown = absl::StrJoin(args, " ");
      EXPECT_EQ(r.err, absl::StrCat("tandem: ", expand(row.message), "\n")) << shown;
      EXPECT_EQ(r.exit_code, row.exit_code) << shown;
      EXPECT_EQ(r.out, "") << shown;
    }
  }

  TempDir tmp_dir_, data_dir_;
  std::string tmp_, data_;
};

TEST_F(BadInputTable, CommandLine) {
  check({
      {{}, "missing subcommand (dump, explore, opt, train, plot, simulate, import, run, export or devices); see tandem --help"},
      {{"frobnicate"},
       "unknown subcommand 'frobnicate' (expected dump, explore, opt, train, plot, simulate, import, run, export or devices)"},
      {{"dump", "--colour"}, "--colour: not a flag of tandem dump (see tandem dump --help)"},
      // Issue 21: a misspelt flag gets the nearest one, a flag of another subcommand says
      // which, and a flag given twice says so (not "needs a value").
      {{"dump", "--modle", "lenet"}, "--modle: not a flag of tandem dump; did you mean --model?"},
      {{"train", "--model", "lenet", "--epoch", "3"},
       "--epoch: not a flag of tandem train; did you mean --epochs?"},
      {{"dump", "--model", "lenet", "--lr", "0.1", "--lr", "0.2"},
       "--lr: given 2 times; give it once (no value silently wins)"},
      {{"train", "--model", "lenet", "--seed", "1", "--seed=2", "--seed", "3"},
       "--seed: given 3 times; give it once (no value silently wins)"},
      {{"dump", "--model"}, "--model: needs a value"},
      {{"dump", "--model", "lenet", "extra"}, "The following argument was not expected: extra"},
  });
}

TEST_F(BadInputTable, ModelAndDevices) {
  check({
      {{"dump"},
       "--model: is required (one of lenet, lenet_bn, resnet18, resnet34, resnet50, resnet101, "
       "resnet152, vit, mlp)"},
      {{"train"}, "--model: is required (one of lenet, lenet_bn, resnet18, vit, mlp)"},
      {{"dump", "--model", "vgg"},
       "--model: unknown model 'vgg' (known: lenet, lenet_bn, resnet18, resnet34, resnet50, "
       "resnet101, resnet152, vit, mlp)"},
      {{"train", "--model", "resnet50"},
       "--model: resnet50 takes 3x224x224 images, but Fashion-MNIST has 1x28x28 (train lenet, "
       "lenet_bn, resnet18, vit or mlp)"},
      {{"dump", "--model", "lenet", "--devices", "cpu:-1"},
       "--devices: unknown device 'cpu:-1': the index must be a non-negative integer"},
      {{"dump", "--model", "lenet", "--devices", "CPU:0"},
       "--devices: unknown device 'CPU:0': the device kind must be cpu or cuda"},
      {{"dump", "--model", "lenet", "--devices", "cpu:99999999999"},
       "--devices: unknown device 'cpu:99999999999': the index must be at most 2147483647"},
      {{"dump", "--model", "lenet", "--devices", "1025"},
       "--devices: device count 1025 is out of range (1 to 1024)"},
      {{"dump", "--model", "lenet", "--devices", "0"},
       "--devices: device count 0 is out of range (1 to 1024)"},
      {{"dump", "--model", "lenet", "--devices", ""}, "--devices: the device list is empty"},
      {{"dump", "--model", "lenet", "--batch", "2", "--devices", "3"},
       "--batch: 2 is smaller than the device count 3; every device needs at least one example"},
      {{"train", "--model", "lenet", "--batch", "2", "--devices", "3"},
       "--batch: 2 is smaller than the device count 3; every device needs at least one example"},
      {{"dump", "--model", "lenet", "--shard-updates"},
       "--shard-updates: shards the weight update across the devices; with one device there is "
       "nothing to shard (give --devices two or more)"},
      {{"dump", "--model", "lenet", "--devices", "2", "--shard-updates", "--clip-grad-norm", "1"},
       "--shard-updates: does not go with --clip-grad-norm yet (the norm needs each shard's sum "
       "of squares all-reduced)"},
  });
}

// cuda:0 where it cannot run: a build without nvcc lacks the kind, a machine without a GPU
// lacks the device, and CUDA's own words for why vary with the machine (no driver, no
// device): the line names the device and says which, before any data loads.
TEST_F(BadInputTable, CudaDeviceWithoutAGpu) {
  CommandResult r = runTandem({"train", "--model", "lenet", "--devices", "cuda:0"});
  if (r.exit_code == 0) GTEST_SKIP() << "this machine trains on cuda:0";
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  const std::string without_kind =
      "tandem: --devices: cuda:0: this build has no cuda backend (use cpu:N devices; "
      "docs/GPU.md says what a CUDA build needs)\n";
  const std::string without_gpu =
      "tandem: --devices: cuda:0: no CUDA GPU on this machine: cudaGetDeviceCount: ";
  if (r.err != without_kind) {
    EXPECT_TRUE(absl::StartsWith(r.err, without_gpu)) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST_F(BadInputTable, Numbers) {
  check({
      {{"dump", "--model", "lenet", "--batch", "0"},
       "--batch: 0 is out of range: must be from 1 to 2147483648"},
      {{"dump", "--model", "lenet", "--batch", "3000000000"},
       "--batch: 3000000000 is out of range: must be from 1 to 2147483648"},
      {{"dump", "--model", "lenet", "--batch", "12x"},
       "--batch: '12x' is not an integer (must be from 1 to 2147483648)"},
      {{"dump", "--model", "lenet", "--batch", "99999999999999999999"},
       "--batch: 99999999999999999999 is out of range: must be from 1 to 2147483648"},
      {{"train", "--model", "lenet", "--epochs", "-99999999999999999999"},
       "--epochs: -99999999999999999999 is out of range: must be from 1 to 100000"},
      {{"dump", "--model", "lenet", "--lr", "-1"}, "--lr: -1 is out of range: must be > 0"},
      {{"dump", "--model", "lenet", "--lr", "0"}, "--lr: 0 is out of range: must be > 0"},
      {{"train", "--model", "lenet", "--lr", "nan"}, "--lr: 'nan' is not a finite number"},
      {{"train", "--model", "lenet", "--lr", "inf"}, "--lr: 'inf' is not a finite number"},
      {{"train", "--model", "lenet", "--lr", "1e999"}, "--lr: '1e999' is not a finite number"},
      {{"dump", "--model", "lenet", "--lr", "abc"}, "--lr: 'abc' is not a finite number"},
      {{"train", "--model", "lenet", "--momentum", "1"},
       "--momentum: 1 is out of range: must be >= 0 and < 1"},
      {{"dump", "--model", "lenet", "--momentum", "-0.1"},
       "--momentum: -0.1 is out of range: must be >= 0 and < 1"},
      {{"train", "--model", "lenet", "--weight-decay", "2"},
       "--weight-decay: 2 is out of range: must be >= 0 and <= 1"},
      // Issue 21: values that f32, the update's arithmetic, rounds to refused or no-op ones.
      {{"train", "--model", "lenet", "--lr", "1e-320"},
       "--lr: 1e-320 rounds to 0 in f32 (the update's arithmetic), which trains nothing; give at "
       "least 1.17549e-38"},
      {{"dump", "--model", "lenet", "--lr", "1e39"},
       "--lr: 1e39 rounds to infinity in f32 (the update's arithmetic)"},
      {{"train", "--model", "lenet", "--momentum", "0.99999999"},
       "--momentum: 0.99999999 rounds to 1 in f32 (the update's arithmetic), which must be >= 0 "
       "and < 1"},
      {{"dump", "--model", "lenet", "--weight-decay", "1e-50"},
       "--weight-decay: 1e-50 rounds to 0 in f32 (the update's arithmetic); give 0 or at least "
       "1.17549e-38"},
      // The optimizer's settings: the ranges of its update op's attributes (ir/ops.td).
      {{"train", "--model", "lenet", "--optimizer", "adam"},
       "--optimizer: 'adam' is no optimizer (adamw, sgd)"},
      {{"dump", "--model", "lenet", "--optimizer", "adamw", "--beta1", "1"},
       "--beta1: 1 is out of range: must be >= 0 and < 1"},
      {{"train", "--model", "lenet", "--optimizer", "adamw", "--beta2", "0.999999999"},
       "--beta2: 0.999999999 rounds to 1 in f32 (the update's arithmetic), which must be >= 0 "
       "and < 1"},
      {{"dump", "--model", "lenet", "--optimizer", "adamw", "--eps", "-1e-8"},
       "--eps: -1e-8 is out of range: must be >= 0"},
      {{"train", "--model", "lenet", "--optimizer", "adamw", "--momentum", "0.9"},
       "--momentum: not a setting of --optimizer adamw (it takes --lr, --beta1, --beta2, --eps, "
       "--weight-decay)"},
      {{"dump", "--model", "lenet", "--beta1", "0.9"},
       "--beta1: not a setting of --optimizer sgd (it takes --lr, --momentum, --weight-decay)"},
      // Label smoothing: nn.CrossEntropyLoss's range, [0, 1).
      {{"train", "--model", "lenet", "--label-smoothing", "1"},
       "--label-smoothing: 1 is out of range: must be >= 0 and < 1"},
      {{"dump", "--model", "lenet", "--label-smoothing", "-0.1"},
       "--label-smoothing: -0.1 is out of range: must be >= 0 and < 1"},
      {{"train", "--model", "lenet", "--label-smoothing", "nan"},
       "--label-smoothing: 'nan' is not a finite number"},
      // The learning-rate schedule (runtime/lr_schedule.h).
      {{"dump", "--model", "lenet", "--schedule", "linear"},
       "--schedule 'linear': unknown schedule (it takes constant, step:EPOCHS:GAMMA such as "
       "step:30:0.1, or cosine)"},
      {{"train", "--model", "lenet", "--schedule", "step:2:1.5"},
       "--schedule 'step:2:1.5': GAMMA must be a number in (0, 1] (it takes constant, "
       "step:EPOCHS:GAMMA such as step:30:0.1, or cosine)"},
      {{"dump", "--model", "lenet", "--bucket-mb", "0"},
       "--bucket-mb: 0 is out of range: must be > 0 and <= 1e+09"},
      {{"train", "--model", "lenet", "--first-bucket-mb", "-1"},
       "--first-bucket-mb: -1 is out of range: must be > 0 and <= 1e+09"},
      {{"train", "--model", "lenet", "--seed", "-1"},
       "--seed: '-1' is not an integer from 0 to 18446744073709551615"},
      {{"train", "--model", "lenet", "--seed", "18446744073709551616"},
       "--seed: '18446744073709551616' is not an integer from 0 to 18446744073709551615"},
      {{"train", "--model", "lenet", "--collective-timeout", "0"},
       "--collective-timeout: 0 is out of range: must be > 0 and <= 86400"},
      {{"train", "--model", "lenet", "--collective-timeout", "soon"},
       "--collective-timeout: 'soon' is not a finite number"},
      {{"dump", "--model", "lenet", "--ranks", "1025"},
       "--ranks: 1025 is out of range: must be from 1 to 1024"},
      {{"dump", "--model", "lenet", "--ranks", "3", "--devices", "512"},
       "--devices: 3 ranks of 512 devices are more than 1024"},
      {{"train", "--model", "lenet", "--trace", "t.json", "--trace-steps", "0"},
       "--trace-steps: 0 is out of range: must be >= 1"},
      {{"train", "--model", "lenet", "--trace", "t.json", "--trace-steps", "two"},
       "--trace-steps: 'two' is not an integer (must be >= 1)"},
      {{"train", "--model", "lenet", "--epochs", "0"},
       "--epochs: 0 is out of range: must be from 1 to 100000"},
      {{"train", "--model", "lenet", "--epochs", "1.5"},
       "--epochs: '1.5' is not an integer (must be from 1 to 100000)"},
      {{"train", "--model", "lenet", "--threads-per-device", "0"},
       "--threads-per-device: 0 is out of range: must be from 1 to 1024"},
      {{"train", "--model", "lenet", "--threads-per-device", "5000"},
       "--threads-per-device: 5000 is out of range: must be from 1 to 1024"},
      {{"train", "--model", "lenet", "--limit-train", "0"},
       "--limit-train: 0 is out of range: must be >= 1"},
      {{"train", "--model", "lenet", "--limit-test", "-5"},
       "--limit-test: -5 is out of range: must be >= 1"},
  });
}

TEST_F(BadInputTable, SplitAndInitializer) {
  check({
      {{"dump", "--model", "lenet", "--devices", "2", "--split", "3,x"},
       "--split: '3,x' is not even or positive weights such as 3,1"},
      {{"dump", "--model", "lenet", "--devices", "2", "--split", "0,1"},
       "--split: '0,1' is not even or positive weights such as 3,1"},
      {{"train", "--model", "lenet", "--devices", "2", "--split", "3,1,1"},
       "--split: 3 weights for 2 devices"},
      {{"train", "--model", "lenet", "--devices", "2", "--split", "fast"},
       "--split: 'fast' is not even, auto, or positive weights such as 3,1"},
      {{"train", "--model", "lenet", "--precision", "fp16"},
       "--precision: 'fp16' is not a dtype Tandem trains in: f32 or bf16"},
      {{"dump", "--model", "lenet", "--allreduce-dtype", "fp8"},
       "--allreduce-dtype: 'fp8' is not a dtype Tandem trains in: f32 or bf16"},
      {{"dump", "--model", "lenet", "--group-updates", "yes"},
       "--group-updates: 'yes' is not auto, on or off"},
      {{"dump", "--model", "lenet", "--devices", "2", "--split", "auto"},
       "--split: auto measures the devices while training; dump takes even or weights such as "
       "3,1"},
      {{"train", "--model", "lenet", "--devices", "2", "--split", "auto", "--profile"},
       "--profile: cannot go with --split auto (both time every node of the step they trace)"},
      {{"train", "--model", "lenet", "--devices", "2", "--split", "auto", "--trace", "t.json"},
       "--trace: cannot go with --split auto (it traces the steps it measures itself)"},
      {{"train", "--model", "lenet", "--trace-steps", "2"},
       "--trace-steps: goes with --trace FILE (which is not given)"},
      {{"dump", "--model", "lenet", "--init", "normal:-1"},
       "--init: 'normal:-1' is not an initializer (kaiming, or normal:STD with 0 < STD <= 100, "
       "such as normal:0.01)"},
      {{"train", "--model", "lenet", "--init", "xavier"},
       "--init: 'xavier' is not an initializer (kaiming, or normal:STD with 0 < STD <= 100, such "
       "as normal:0.01)"},
  });
}

TEST_F(BadInputTable, ConvAlgorithm) {
  check({
      {{"train", "--model", "resnet18", "--conv-algorithm", "winograd"},
       "--conv-algorithm: unknown algorithm 'winograd' (expected auto, direct, measure)"},
      {{"train", "--model", "lenet", "--conv-algorithm", ""},
       "--conv-algorithm: unknown algorithm '' (expected auto, direct, measure)"},
      {{"train", "--model", "lenet", "--conv-algorithm"}, "--conv-algorithm: needs a value"},
      {{"dump", "--model", "lenet", "--conv-algorithm", "direct"},
       "--conv-algorithm: not a flag of tandem dump (tandem train takes it; see tandem dump "
       "--help)"},
  });
}

TEST_F(BadInputTable, DumpOutputSelection) {
  check({
      {{"dump", "--model", "lenet", "--after", "frobnicate"},
       "--after: 'frobnicate' is not a pass of the default pipeline (autodiff, "
       "fuse-conv-bn-relu, replicate, insert-collectives, recompute-bn-relu, dce, schedule, "
       "assign-streams, plan-events, assign-layouts, plan-memory, or none)"},
      {{"dump", "--model", "lenet", "--format", "xml"},
       "--format: unknown format 'xml' (expected text, dot, summary, streams, memory)"},
      {{"dump", "--model", "lenet", "--graph", "backward"},
       "--graph: module lenet has no graph 'backward' (it has init, train_step, eval_step)"},
      {{"dump", "--model", "lenet", "--memory", "--format", "dot"},
       "--memory: is --format memory, and cannot go with --format dot"},
      {{"dump", "--model", "lenet", "--format", "summary", "--canonical"},
       "--canonical: applies to --format text only (source locations), not --format summary"},
      {{"dump", "--model", "lenet", "--format", "summary", "--graph", "init"},
       "--graph: --format summary describes the whole module; drop --graph, or use another "
       "format"},
      {{"dump", "--model", "lenet", "--after", "dce", "--memory"},
       "--format memory: needs plan-memory, the last pass of the pipeline; --after dce stops "
       "before it"},
      {{"dump", "--model", "lenet", "--after", "none", "--format", "streams"},
       "--format streams needs a replicated module (run replicate)"},
      {{"dump", "--model", "lenet", "-o", "/nonexistent-dir/x.tir"},
       "--output: cannot write '/nonexistent-dir/x.tir': No such file or directory"},
      {{"dump", "--model", "lenet", "-o", "$TMP"}, "--output: cannot write '$TMP': Is a directory"},
      {{"dump", "--model", "lenet", "-o", "/dev/full"},
       "--output: cannot write '/dev/full': No space left on device"},
  });
}

TEST_F(BadInputTable, DotViews) {
  check({
      {{"dump", "--model", "lenet", "--collapse", "2"},
       "--collapse: applies to --format dot only (boxes per scope), not --format text"},
      {{"dump", "--model", "lenet", "--format", "summary", "--focus", "conv1"},
       "--focus: applies to --format dot only (one scope drawn node by node), not --format "
       "summary"},
      {{"dump", "--model", "lenet", "--format", "dot", "--collapse", "-1"},
       "--collapse: -1 is out of range: must be from 0 to 64"},
      {{"dump", "--model", "lenet", "--format", "dot", "--collapse", "blocks"},
       "--collapse: 'blocks' is not an integer (must be from 0 to 64)"},
      {{"dump", "--model", "lenet", "--format", "dot", "--collapse", "0", "--focus", "conv1"},
       "--focus: --collapse 0 draws every node already; drop --focus, or collapse the rest "
       "with --collapse 1 or more"},
      {{"dump", "--model", "lenet", "--format", "dot", "--focus", ""},
       "--focus: empty scope; give one such as stage2.block0 (the error of a wrong one lists "
       "the graph's scopes)"},
      {{"dump", "--model", "lenet", "--format", "dot", "--focus", "conv9"},
       "--focus: graph @train_step has no scope 'conv9' (scopes at depth 1: conv1, relu, pool1, "
       "conv2, relu_1, pool2, flatten, fc1, ... 12 in all)"},
      {{"dump", "--model", "resnet18", "--format", "dot", "--collapse", "2", "--focus",
        "stage2.blk0"},
       "--focus: graph @train_step has no scope 'stage2.blk0' (scopes at depth 2: stem, "
       "stem.conv, stage1.block0, stage1.block1, stage2.block0, stage2.block1, stage3.block0, "
       "stage3.block1, ... 16 in all)"},
  });
}

// tandem explore: its flags, and a trace of another module, device count or batch, each in
// one line naming what differs.
TEST_F(BadInputTable, Explore) {
  TANDEM_NEED_INSTALLED(whyNoExploreLayout());
  const CommandResult train =
      runTandem({"train", "--model", "lenet", "--devices", "2", "--batch", "20", "--epochs", "1",
                 "--data", data_, "--trace", tmp_ + "/t.json"});
  ASSERT_EQ(train.exit_code, 0) << train.err;
  ASSERT_EQ(
      runTandem({"dump", "--model", "lenet", "--devices", "2", "-o", tmp_ + "/x.tir"}).exit_code,
      0);
  writeFile(tmp_ + "/bad.json", "not json");
  const std::vector<std::string> lenet2 = {"explore", "--model", "lenet", "--devices",
                                           "2",       "--batch", "20"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = lenet2;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  check({
      {{"explore", "--model", "lenet"},
       "--output: required: the HTML page to write (-o STEP.html)"},
      {{"explore", "--model", "lenet", "--module", "$TMP/x.tir", "-o", "$TMP/p.html"},
       "--module: and --model lenet name two modules; give one"},
      {{"explore", "--module", "$TMP/x.tir", "--after", "replicate", "-o", "$TMP/p.html"},
       "--after: applies to a compiled --model; a --module file is explored as it is"},
      {{"explore", "--model", "lenet", "--graph", "loss", "-o", "$TMP/p.html"},
       "--graph: module lenet has no graph 'loss' (it has init, train_step, eval_step)"},
      {with({"-o", "$TMP"}), "--output: cannot write '$TMP': Is a directory"},
      {with({"--trace", "$TMP/none.json", "-o", "$TMP/p.html"}),
       "cannot read --trace '$TMP/none.json': No such file or directory"},
      {with({"--trace", "$TMP", "-o", "$TMP/p.html"}),
       "--trace '$TMP' is a directory, not a Chrome trace (train --trace)"},
      {with({"--trace", "$TMP/bad.json", "-o", "$TMP/p.html"}),
       "--trace $TMP/bad.json: is not JSON: parse error at line 1, column 2: syntax error while "
       "parsing value - invalid literal; last read: 'no'"},
      {with({"--trace", "$TMP/t.json", "-o", "$TMP/t.json"}),
       "--output: '$TMP/t.json' is a file --trace reads; writing it would destroy that input"},
      {with({"--trace", "$TMP/t.json", "--graph", "init", "-o", "$TMP/p.html"}),
       "--trace: train --trace records @train_step, and --graph is init; drop one of them"},
      {with({"--trace", "$TMP/t.json", "--after", "autodiff", "-o", "$TMP/p.html"}),
       "--trace: the module is not yet replicated (--after autodiff); a trace is of the whole "
       "step"},
      // Another device count, another model, another batch.
      {{"explore", "--model", "lenet", "--devices", "4", "--batch", "20", "--trace", "$TMP/t.json",
        "-o", "$TMP/p.html"},
       "--trace $TMP/t.json: is a trace of 2 devices (cpu:0, cpu:1), the module runs on 4 "
       "(cpu:0, cpu:1, cpu:2, cpu:3)"},
      {{"explore", "--model", "resnet18", "--devices", "2", "--batch", "20", "--trace",
        "$TMP/t.json", "-o", "$TMP/p.html"},
       "--trace $TMP/t.json: its slice of %conv1.0 (conv2d @cpu:0, scope conv1) is no node of "
       "@train_step of resnet18: a trace of another module"},
      {{"explore", "--model", "lenet", "--devices", "2", "--batch", "40", "--trace", "$TMP/t.json",
        "-o", "$TMP/p.html"},
       "--trace $TMP/t.json: its slice of %x.0 (split) on cpu:0 writes 31360 bytes, the "
       "module's writes 62720 bytes: a trace of another batch, split or precision"},
      {with({"--metrics", "$TMP/none.csv", "-o", "$TMP/p.html"}),
       "--metrics: cannot read '$TMP/none.csv': No such file or directory"},
      {with({"--metrics", "$TMP/bad.json", "-o", "$TMP/p.html"}),
       "--metrics: $TMP/bad.json:1: the header has no column 'epoch' (expected the CSV that "
       "tandem train --metrics writes)"},
  });
  // No page is left behind by a refused run.
  EXPECT_FALSE(std::filesystem::exists(tmp_ + "/p.html"));
}

TEST_F(BadInputTable, OptFiles) {
  tmp_dir_.write("good.tir", runTandem({"dump", "--model", "lenet", "--batch", "8"}).out);
  // A 1 MiB word where 'module' belongs: the message quotes 48 bytes of it, not all.
  tmp_dir_.write("huge.tir", std::string(1 << 20, 'a'));
  check({
      {{"opt"}, "opt: missing the IR file argument ('-' for standard input)"},
      {{"opt", "$TMP"}, "IR file '$TMP' is a directory, not an IR file"},
      {{"opt", "$TMP/missing.tir"},
       "cannot read IR file '$TMP/missing.tir': No such file or directory"},
      {{"opt", "$TMP/huge.tir"},
       "$TMP/huge.tir:1:1: expected 'module', got "
       "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa... (1048576 bytes)'"},
      {{"opt", "$TMP/good.tir", "--passes", "dce,frobnicate"},
       "--passes: unknown pass 'frobnicate' (known: mixed-precision, autodiff, "
       "feed-learning-rate, fuse-conv-bn-relu, "
       "replicate, insert-collectives, clip-grad-norm, shard-weight-update, recompute-bn-relu, "
       "dce, schedule, "
       "group-updates, assign-streams, plan-events, assign-layouts, plan-memory)"},
      {{"opt", "$TMP/good.tir", "--passes", "dce", "--print-after", "dcee"},
       "--print-after: 'dcee' is not a pass of the pipeline (dce, or *)"},
      {{"opt", "$TMP/good.tir", "--print-after", "dce"},
       "--print-after: 'dce' is not a pass of the pipeline (it is empty, or *)"},
  });
}

TEST_F(BadInputTable, TrainFilesAndData) {
  check({
      {{"train", "--model", "lenet", "--metrics", ""}, "--metrics: the file name is empty"},
      {{"train", "--model", "lenet", "--metrics", "/dev/full"},
       "--metrics: cannot write '/dev/full': No space left on device"},
      {{"train", "--model", "lenet", "--metrics", "$TMP"},
       "--metrics: cannot write '$TMP': Is a directory"},
      {{"train", "--model", "lenet", "--trace", ""}, "--trace: the file name is empty"},
      {{"train", "--model", "lenet", "--trace", "$TMP"},
       "--trace: cannot write '$TMP': Is a directory"},
      {{"train", "--model", "lenet", "--trace", "$TMP/no/such/dir/t.json"},
       "--trace: cannot write '$TMP/no/such/dir/t.json': No such file or directory"},
      {{"train", "--model", "lenet", "--trace", "-"},
       "--trace: standard output carries the epoch table; name a file such as trace.json"},
      {{"train", "--model", "lenet", "--data", "/nonexistent/fmnist"},
       "fashion-mnist: directory /nonexistent/fmnist does not exist (install the Debian package "
       "dataset-fashion-mnist or pass --data DIR)"},
      {{"train", "--model", "lenet", "--data", "/etc/hostname"},
       "fashion-mnist: /etc/hostname is not a directory (install the Debian package "
       "dataset-fashion-mnist or pass --data DIR)"},
      {{"train", "--model", "lenet", "--data", "$TMP"},
       "fashion-mnist: $TMP/train-images-idx3-ubyte.gz not found (nor train-images-idx3-ubyte "
       "uncompressed) (install the Debian package dataset-fashion-mnist or pass --data DIR)"},
      {{"train", "--model", "lenet", "--data", "$DATA", "--limit-train", "101"},
       "--limit-train: 101 is more than the 100 training images in $DATA"},
      {{"train", "--model", "lenet", "--data", "$DATA", "--limit-test", "51"},
       "--limit-test: 51 is more than the 50 test images in $DATA"},
      {{"train", "--model", "lenet", "--data", "$DATA", "--batch", "101"},
       "--batch: 101 is more than the 100 training images (lower --batch)"},
      {{"train", "--model", "lenet", "--data", "$DATA", "--limit-train", "20", "--batch", "32"},
       "--batch: 32 is more than the 20 training images left by --limit-train (lower --batch)"},
      // A warmup the user gives is the user's to shorten (the model's own one follows the
      // run: a tenth of a run no longer than it).
      {{"train", "--model", "vit", "--data", "$DATA", "--batch", "10", "--epochs", "1", "--warmup",
        "10"},
       "--warmup 10: the run has 10 steps, so cosine would have none left after the warmup"},
  });
}

// Checkpoints that cannot be resumed, and checkpoint directories that cannot be written.
// "$TMP/good" holds a 2-epoch LeNet checkpoint; the others are damaged copies of it.
TEST_F(BadInputTable, TrainCheckpoints) {
  ASSERT_EQ(runTandem({"train", "--model", "lenet", "--data", data_, "--batch", "10", "--epochs",
                       "2", "--checkpoint", expand("$TMP/good")})
                .exit_code,
            0);
  const std::string good = readFile(expand("$TMP/good/checkpoint"));
  auto damaged = [&](const std::string& name, const std::string& bytes) {
    ASSERT_EQ(mkdir(expand("$TMP/" + name).c_str(), 0755), 0);
    tmp_dir_.write(name + "/checkpoint", bytes);
  };
  damaged("cut", good.substr(0, 100));
  std::string v9 = good;
  v9[8] = 9;  // the format version, after the 8-byte magic
  damaged("v9", v9);
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x04;
  damaged("flipped", flipped);
  damaged("text", "epoch 3\n");
  uint32_t stored = 0;
  for (int i = 3; i >= 0; --i)
    stored = stored << 8 | static_cast<unsigned char>(good[good.size() - 4 + i]);
  const auto computed = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(flipped.data()), static_cast<uInt>(good.size() - 4)));
  const std::vector<std::string> lenet = {"train", "--model", "lenet", "--data", "$DATA",
                                          "--batch", "10"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = lenet;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  check({
      {with({"--resume", "$TMP/none"}),
       "--resume: cannot read '$TMP/none/checkpoint': No such file or directory (no checkpoint "
       "was written in that directory)"},
      {with({"--resume", "$TMP/cut"}),
       absl::StrCat("--resume: '$TMP/cut/checkpoint' is truncated: 100 of its ", good.size(),
                    " bytes")},
      {with({"--resume", "$TMP/flipped"}),
       absl::StrFormat("--resume: '$TMP/flipped/checkpoint' is corrupt: its content has crc32 "
                       "%08x, but %08x is stored (flipped bytes)",
                       computed, stored)},
      {with({"--resume", "$TMP/v9"}),
       "--resume: '$TMP/v9/checkpoint' has checkpoint format version 9; this tandem reads "
       "versions 1 to 2"},
      {with({"--resume", "$TMP/text"}),
       "--resume: '$TMP/text/checkpoint' is not a Tandem checkpoint (it does not start with "
       "TNDMCKPT)"},
      {{"train", "--model", "resnet18", "--data", "$DATA", "--batch", "10", "--resume",
        "$TMP/good"},
       "--resume: '$TMP/good/checkpoint' is a checkpoint of lenet, not of resnet18 (--model)"},
      {{"train", "--model", "lenet", "--data", "$DATA", "--batch", "20", "--resume", "$TMP/good"},
       "--resume: '$TMP/good/checkpoint' was written with --batch 10; this run has --batch 20 "
       "(resume with the value it was written with)"},
      {with({"--resume", "$TMP/good", "--epochs", "1"}),
       "--epochs: 1 is fewer than the 2 epochs '$TMP/good/checkpoint' has finished already"},
      {with({"--checkpoint", "$TMP/good"}),
       "--checkpoint: '$TMP/good/checkpoint' exists already; continue that run with --resume "
       "$TMP/good, or write to another directory"},
      {with({"--checkpoint", "/etc/hostname"}), "--checkpoint: '/etc/hostname' is not a directory"},
      {with({"--checkpoint", "$TMP/no/such/dir"}),
       "--checkpoint: cannot create directory '$TMP/no/such/dir': No such file or directory"},
      {with({"--checkpoint-every", "5"}),
       "--checkpoint-every: goes with --checkpoint DIR (which is not given)"},
  });
  EXPECT_EQ(readFile(expand("$TMP/good/checkpoint")), good) << "a refused run wrote over it";
}

// Standard output that cannot take the result: a full disk, or closed.
TEST_F(BadInputTable, StandardOutputThatFails) {
  const std::string cli = TANDEM_CLI_PATH;
  CommandResult full =
      runProgram("/bin/sh", {"-c", cli + " dump --model lenet --format summary > /dev/full"});
  EXPECT_EQ(full.exit_code, 2);
  EXPECT_EQ(full.err, "tandem: cannot write to standard output: No space left on device\n");
  CommandResult closed =
      runProgram("/bin/sh", {"-c", cli + " dump --model lenet --format summary >&-"});
  EXPECT_EQ(closed.exit_code, 2);
  EXPECT_EQ(closed.err, "tandem: cannot write to standard output: Bad file descriptor\n");
  CommandResult stdin_closed = runProgram("/bin/sh", {"-c", cli + " opt - <&-"});
  EXPECT_EQ(stdin_closed.exit_code, 2);
  EXPECT_EQ(stdin_closed.err, "tandem: cannot read standard input: Bad file descriptor\n");
  CommandResult train =
      runProgram("/bin/sh", {"-c", absl::StrCat(cli, " train --model lenet --data ", data_,
                                                " --batch 50 --epochs 1 > /dev/full")});
  EXPECT_EQ(train.exit_code, 2);
  EXPECT_EQ(train.err, "tandem: cannot write to standard output: No space left on device\n");
}

// A loss that turns infinite stops the run with exit 3, naming the epoch and step;
// --allow-nonfinite trains on.
TEST_F(BadInputTable, NonFiniteLossStopsTheRun) {
  CommandResult r = runTandem({"train", "--model", "lenet", "--data", data_, "--batch", "10",
                               "--epochs", "2", "--lr", "3e38"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(r.err.rfind("tandem: the loss is ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(" at epoch 1, step "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(lr 3e+38): training diverged; lower --lr, or pass --allow-nonfinite"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("\n    1 "), std::string::npos) << "no epoch row after a divergence\n"
                                                       << r.out;
  CommandResult on = runTandem({"train", "--model", "lenet", "--data", data_, "--batch", "10",
                                "--epochs", "1", "--lr", "3e38", "--allow-nonfinite"});
  EXPECT_EQ(on.exit_code, 0) << on.err;
  EXPECT_NE(on.out.find("\n    1 "), std::string::npos) << on.out;
}

// The run header says what is trained: the per-device split of an uneven batch, and how
// many images an epoch really uses when the last partial batch is dropped.
TEST_F(BadInputTable, RunHeaderTellsTheTruth) {
  CommandResult r = runTandem({"train", "--model", "lenet", "--data", data_, "--batch", "32",
                               "--devices", "3", "--epochs", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find("epoch train_loss")),
            "lenet on [cpu:0, cpu:1, cpu:2], batch 32 (11/11/10 per device), lr 0.1, momentum "
            "0.9, weight decay 0, init kaiming, seed 0\n96 of 100 training images per epoch in 3 "
            "steps (the 4 that do not fill a batch are left out, different ones each epoch), 50 "
            "test images\n");
}

// Legal but surely wrong: more kernel threads than cores is a warning, and the run goes on.
TEST_F(BadInputTable, MoreThreadsThanCoresIsAWarning) {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  const std::string threads = absl::StrCat(std::min<long>(1024, cores + 1));
  CommandResult r = runTandem({"train", "--model", "lenet", "--data", data_, "--batch", "50",
                               "--devices", "2", "--epochs", "1", "--threads-per-device", threads});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.rfind(absl::StrCat("tandem: warning: --threads-per-device ", threads,
                                     " on 2 devices asks for "),
                        0),
            0u)
      << r.err;
  EXPECT_NE(r.out.find("\n    1 "), std::string::npos) << r.out;
}

// An unreadable data directory is reported as unreadable, not as missing. Root reads
// everything, so the check runs as the user nobody when the test runs as root.
TEST_F(BadInputTable, UnreadableDataDirectory) {
  TempDir outer;
  std::string dir = outer.file("locked");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  chmod(outer.file("").c_str(), 0755);
  const passwd* nobody = getpwnam("nobody");
  if (geteuid() == 0 && nobody == nullptr) GTEST_SKIP() << "running as root with no user nobody";
  std::string err_path = absl::StrCat(tmp_, "/err.txt");
  chmod(tmp_.c_str(), 0777);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (geteuid() == 0 && (setgid(nobody->pw_gid) != 0 || setuid(nobody->pw_uid) != 0)) _exit(126);
    if (std::freopen(err_path.c_str(), "w", stderr) == nullptr) _exit(125);
    if (std::freopen("/dev/null", "w", stdout) == nullptr) _exit(125);
    execl(TANDEM_CLI_PATH, TANDEM_CLI_PATH, "train", "--model", "lenet", "--data", dir.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 127) GTEST_SKIP() << "nobody cannot run " << TANDEM_CLI_PATH;
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_EQ(readFile(err_path), absl::StrCat("tandem: fashion-mnist: cannot read directory ", dir,
                                             ": Permission denied\n"));
}

// Issue 21, class 1: data whose images are not the model's. Every dimension of every
// input is checked against the compiled module before anything runs (the old loader read
// batch x 784 floats from a smaller or larger image and crashed or trained on misaligned
// pixels), and the line names the file, what it holds and what the model takes.
TEST_F(BadInputTable, DataThatDoesNotFitTheModel) {
  TempDir small, one, wide, tall_test, empty_test;
  writeIdxSplit(small, "train", 100, 14, 14);
  writeIdxSplit(small, "t10k", 50, 14, 14);
  writeIdxSplit(one, "train", 100, 1, 1);
  writeIdxSplit(one, "t10k", 50, 1, 1);
  writeIdxSplit(wide, "train", 100, 32, 32);
  writeIdxSplit(wide, "t10k", 50, 32, 32);
  writeIdxSplit(tall_test, "train", 100);
  writeIdxSplit(tall_test, "t10k", 50, 27, 29);
  writeIdxSplit(empty_test, "train", 100);
  writeIdxSplit(empty_test, "t10k", 0);
  auto dir = [](const TempDir& d) {
    std::string p = d.file("");
    p.pop_back();
    return p;
  };
  auto train = [&](const TempDir& d, const std::string& model) {
    return std::vector<std::string>{"train",   "--model", model,      "--data", dir(d),
                                    "--batch", "10",      "--epochs", "1"};
  };
  check({
      {train(small, "lenet"),
       absl::StrCat(dir(small),
                    "/train-images-idx3-ubyte holds 100 images of 1x14x14, but lenet "
                    "takes images of 1x28x28 (@train_step's input %x: "
                    "f32[10,1,28,28])")},
      {train(one, "lenet"),
       absl::StrCat(dir(one),
                    "/train-images-idx3-ubyte holds 100 images of 1x1x1, but lenet "
                    "takes images of 1x28x28 (@train_step's input %x: "
                    "f32[10,1,28,28])")},
      {train(wide, "resnet18"),
       absl::StrCat(dir(wide),
                    "/train-images-idx3-ubyte holds 100 images of 1x32x32, but "
                    "resnet18 takes images of 1x28x28 (@train_step's input %x: "
                    "f32[10,1,28,28])")},
      {train(tall_test, "lenet"),
       absl::StrCat(dir(tall_test),
                    "/t10k-images-idx3-ubyte holds 50 images of 1x27x29, but "
                    "lenet takes images of 1x28x28 (@eval_step's input %x: "
                    "f32[10,1,28,28])")},
      // Class 10: no test images is no accuracy to report (it read 0.0000).
      {train(empty_test, "lenet"),
       absl::StrCat(dir(empty_test),
                    "/t10k-images-idx3-ubyte holds no images: nothing to "
                    "evaluate")},
  });
}

// Issue 21, classes 5 and 10: files that are not regular files are refused rather than
// read forever (a FIFO blocked, /dev/zero never ended) or thrown about (a directory read
// as the metrics CSV aborted with std::ios_failure).
TEST_F(BadInputTable, InputsThatAreNotRegularFiles) {
  const std::string fifo_data = tmp_ + "/fifo-data";
  ASSERT_EQ(mkdir(fifo_data.c_str(), 0755), 0);
  ASSERT_EQ(mkfifo((fifo_data + "/train-images-idx3-ubyte").c_str(), 0644), 0);
  ASSERT_EQ(mkfifo(expand("$TMP/fifo.tir").c_str(), 0644), 0);
  ASSERT_EQ(mkdir(expand("$TMP/zero").c_str(), 0755), 0);
  ASSERT_EQ(symlink("/dev/zero", expand("$TMP/zero/checkpoint").c_str()), 0);
  tmp_dir_.write("fifo-data/train-labels-idx1-ubyte", std::string("\0\0\x08\x01\0\0\0\0", 8));
  std::vector<BadInput> rows = {
      {{"train", "--model", "lenet", "--data", "$TMP/fifo-data"},
       "$TMP/fifo-data/train-images-idx3-ubyte is a FIFO (named pipe), not an IDX file"},
      {{"opt", "$TMP/fifo.tir"}, "IR file '$TMP/fifo.tir' is a FIFO (named pipe), not an IR file"},
      {{"opt", "/dev/zero"},
       "IR file '/dev/zero' is a character device (such as /dev/zero), not an IR file"},
      {{"train", "--model", "lenet", "--data", "$DATA", "--resume", "$TMP/zero"},
       "--resume: '$TMP/zero/checkpoint' is a character device (such as /dev/zero), not a "
       "checkpoint file"},
  };
  if (::access("/usr/bin/gnuplot", X_OK) == 0)
    rows.push_back({{"plot", "$TMP", "-o", "$TMP/o.svg"},
                    "'$TMP' is a directory, not a metrics CSV (tandem train --metrics writes "
                    "one)"});
  check(rows);
}

// The address space (KiB, as ulimit -v takes it) the CLI needs to start at all, to 25 MB:
// a build with the CUDA backend maps cuBLASLt and cuDNN (about 1 GB), a CPU-only one a
// tenth of that. The limits below are this much plus what each case needs.
int64_t addressSpaceToStart(const std::string& cli) {
  auto starts = [&cli](int64_t kib) {
    return runProgram("/bin/sh",
                      {"-c", absl::StrCat("ulimit -v ", kib, "; exec ", cli, " --version")})
               .exit_code == 0;
  };
  int64_t fails = 25'000, runs = 16'000'000;
  if (starts(fails)) return fails;
  while (runs - fails > 25'000) {
    const int64_t mid = (fails + runs) / 2;
    (starts(mid) ? runs : fails) = mid;
  }
  return runs;
}

// Issue 21, class 5: what the machine refuses is one line naming it and exit 5, not an
// uncaught exception (std::system_error from a thread that cannot start aborted with exit
// 134 and no message). Stacks of 1 GiB in 2.4 GB of address space beyond what the CLI
// needs to start leave room for two stream threads; a third of the 8 devices' cannot start.
TEST_F(BadInputTable, WhatTheMachineRefusesIsOneLine) {
  const std::string cli = TANDEM_CLI_PATH;
  const int64_t base = addressSpaceToStart(cli);
  const CommandResult threads =
      runProgram("/bin/sh", {"-c", absl::StrCat("ulimit -s 1048576; ulimit -v ", base + 2'400'000,
                                                "; exec ", cli, " train --model lenet --data ",
                                                data_, " --batch 10 --epochs 1 --devices 8")});
  EXPECT_EQ(threads.exit_code, 5) << threads.err;
  EXPECT_EQ(threads.out, "");
  EXPECT_TRUE(absl::StartsWith(threads.err, "tandem: cpu:")) << threads.err;
  EXPECT_TRUE(absl::EndsWith(threads.err,
                             ": cannot start its stream threads: Resource temporarily unavailable "
                             "(a limit on threads or memory: ulimit -u, ulimit -v)\n"))
      << threads.err;
  // A device's arena that does not fit is named with its device and graph.
  const CommandResult arena = runProgram(
      "/bin/sh",
      {"-c", absl::StrCat("ulimit -v ", base + 300'000, "; exec ", cli,
                          " train --model resnet18 --batch 100 --epochs 1 --data ", data_)});
  EXPECT_EQ(arena.exit_code, 5) << arena.err;
  EXPECT_TRUE(absl::StartsWith(arena.err, "tandem: cpu:0: the arena of @")) << arena.err;
  EXPECT_NE(arena.err.find(": out of host memory for "), std::string::npos) << arena.err;
  EXPECT_EQ(std::count(arena.err.begin(), arena.err.end(), '\n'), 1) << arena.err;
}

// Issue 21, class 6: two outputs on one path, or an output on an input, are refused before
// anything is written (--metrics m.json --trace m.json kept only the trace).
TEST_F(BadInputTable, OutputsThatWouldLoseData) {
  ASSERT_EQ(mkdir(expand("$TMP/sub").c_str(), 0755), 0);
  const std::string up = "$TMP/sub/../m.json";  // the same file by another name
  const std::vector<std::string> lenet = {"train",   "--model", "lenet",    "--data", "$DATA",
                                          "--batch", "10",      "--epochs", "1"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = lenet;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  check({
      {with({"--metrics", "$TMP/m.json", "--trace", "$TMP/m.json"}),
       "--trace: '$TMP/m.json' is a file --metrics writes too; give each output its own file"},
      {with({"--metrics", "$TMP/m.json", "--trace", up}),
       "--trace: '$TMP/sub/../m.json' is a file --metrics writes too; give each output its own "
       "file"},
      {with({"--metrics", "$TMP/x.svg", "--plot", "$TMP/x.svg"}),
       "--plot: '$TMP/x.svg' is a file --metrics writes too; give each output its own file"},
      {with({"--checkpoint", "$TMP/ck", "--metrics", "$TMP/ck/checkpoint"}),
       "--metrics: '$TMP/ck/checkpoint' is a file --checkpoint writes too; give each output its "
       "own file"},
      {with({"--checkpoint", "$TMP/ck", "--trace", "$TMP/ck/checkpoint.tmp.x"}),
       "--trace: '$TMP/ck/checkpoint.tmp.x' is a file --checkpoint writes too; give each output "
       "its own file"},
      {with({"--metrics", "$DATA/train-labels-idx1-ubyte"}),
       "--metrics: '$DATA/train-labels-idx1-ubyte' is a file --data reads; writing it would "
       "destroy that input"},
  });
  EXPECT_FALSE(std::filesystem::exists(expand("$TMP/m.json")));
  EXPECT_FALSE(std::filesystem::exists(expand("$TMP/ck")));
  EXPECT_EQ(std::filesystem::file_size(expand("$DATA/train-labels-idx1-ubyte")), 108u);
}

// Issue 21, class 9: flags that change nothing here say so, one line each, and the run
// goes on; the run header counts in the singular when it should.
TEST_F(BadInputTable, FlagsThatChangeNothingAreWarnings) {
  CommandResult r = runTandem({"train", "--model", "lenet", "--data", data_, "--batch", "100",
                               "--epochs", "1", "--sync-bn", "--devices", "2", "--no-tf32",
                               "--no-cuda-graphs", "--collective-timeout", "5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err,
            "tandem: warning: --sync-bn: lenet has no batch norm, so there are no statistics to "
            "all-reduce; it changes nothing\n"
            "tandem: warning: --no-tf32: only CUDA devices round f32 to TF32; the CPU devices "
            "compute in full f32 anyway\n"
            "tandem: warning: --no-cuda-graphs: only CUDA devices record steps as CUDA graphs; it "
            "changes nothing on CPU devices\n"
            "tandem: warning: --collective-timeout: bounds waits for other processes under "
            "mpirun; this run is one process\n");
  EXPECT_NE(r.out.find("100 training images per epoch in 1 step, 50 test images\n"),
            std::string::npos)
      << r.out;
  CommandResult one = runTandem(
      {"dump", "--model", "resnet18", "--devices", "1", "--sync-bn", "--format", "summary"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(one.err,
            "tandem: warning: --sync-bn: one device normalizes with the whole batch's statistics "
            "already; it changes nothing\n");
  check({
      {{"simulate", "--model", "resnet50", "--measure-steps", "5"},
       "--measure-steps: times steps on this CPU (--gpu cpu); --gpu h100 predicts from the GPU's "
       "datasheet without running any"},
      {{"simulate", "--model", "resnet50", "--step-ms", "1e300"},
       "--step-ms: 1e300 is out of range: must be > 0 and <= 1e+06"},
  });
  EXPECT_TRUE(
      isUsageError(runTandem({"simulate", "--model", "resnet50", "--batch-per-device", "100000"}),
                   {"--batch-per-device: 100000 images of resnet50 need ", " GB per device (",
                    "more than an h100's 80 GB; lower --batch-per-device"}));
}

}  // namespace
}  // namespace tandem::testing

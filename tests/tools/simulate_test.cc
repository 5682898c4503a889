// `tandem simulate`: the table's figures hang together, the sweep picks the fastest
// setting, --step-ms scales compute, and bad flags are refused with one line.

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/tools/cli_helpers.h"

namespace tandem::testing {
namespace {

struct TableRow {
  double devices, step_ms, compute_ms, comm_ms, exposed_ms, efficiency, images_per_s;
};

// The rows under the header line of simulate's table.
std::vector<TableRow> rowsOf(const std::string& out) {
  std::vector<TableRow> rows;
  bool header = false;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (line.find("step ms") != absl::string_view::npos) {
      header = true;
      continue;
    }
    if (!header || line.empty()) continue;
    std::istringstream in{std::string(line)};
    TableRow r{};
    in >> r.devices >> r.step_ms >> r.compute_ms >> r.comm_ms >> r.exposed_ms >> r.efficiency >>
        r.images_per_s;
    EXPECT_FALSE(in.fail()) << line;
    rows.push_back(r);
  }
  return rows;
}

CommandResult simulate(std::vector<std::string> args) {
  args.insert(args.begin(), "simulate");
  CommandResult r = runTandem(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  return r;
}

TEST(Simulate, ResNet50TableHangsTogether) {
  CommandResult r = simulate({"--model", "resnet50", "--devices", "1,8,64,512,1024"});
  std::vector<TableRow> rows = rowsOf(r.out);
  ASSERT_EQ(rows.size(), 5u) << r.out;
  EXPECT_EQ(rows[0].efficiency, 100.0);
  EXPECT_EQ(rows[0].comm_ms, 0.0);
  for (size_t i = 0; i < rows.size(); ++i) {
    const TableRow& x = rows[i];
    EXPECT_GE(x.step_ms, x.compute_ms);
    EXPECT_LE(x.exposed_ms, x.comm_ms + 0.01);
    EXPECT_NEAR(x.images_per_s, x.devices * 32 / (x.step_ms * 1e-3), 0.01 * x.images_per_s);
    // Every device computes the same; communication only grows with the devices.
    EXPECT_NEAR(x.compute_ms, rows[0].compute_ms, 0.011);
    if (i > 0) {
      EXPECT_LE(x.efficiency, rows[i - 1].efficiency);
      EXPECT_GT(x.comm_ms, 0);
    }
  }
}

// --shard-updates (issue 27): the optimizer state is cut over the devices, so a device
// holds the parameters and 1/p of the state (resnet50's SGD momentum: as much as the
// parameters; vit's AdamW moments, its default: twice as much); one device runs the
// replicated step.
std::vector<double> variablesMb(const std::string& out) {
  std::vector<double> mb;
  bool header = false;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (line.find("variables MB") != absl::string_view::npos) {
      header = true;
      continue;
    }
    if (!header || line.empty()) continue;
    std::vector<std::string> cells = absl::StrSplit(line, ' ', absl::SkipEmpty());
    mb.push_back(std::stod(cells.back()));
  }
  return mb;
}

TEST(Simulate, ShardedUpdatesCutTheStatePerDevice) {
  for (auto [model, state_share] : {std::pair{"resnet50", 0.5}, std::pair{"vit", 2.0 / 3}}) {
    SCOPED_TRACE(model);
    std::vector<std::string> args = {"--model", model, "--devices", "1,8,1024"};
    if (state_share == 0.5) args.insert(args.end(), {"--momentum", "0.9"});
    std::vector<std::string> sharded = args;
    sharded.push_back("--shard-updates");
    const CommandResult plain_run = simulate(args), sharded_run = simulate(sharded);
    const std::vector<double> plain = variablesMb(plain_run.out);
    const std::vector<double> shards = variablesMb(sharded_run.out);
    ASSERT_EQ(plain.size(), 3u) << plain_run.out;
    ASSERT_EQ(shards.size(), 3u) << sharded_run.out;
    for (size_t i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(plain[i], plain[0]) << plain_run.out;
    EXPECT_DOUBLE_EQ(shards[0], plain[0]);  // one device: nothing to shard
    const double state = state_share * plain[0];
    EXPECT_NEAR(shards[1], plain[0] - state * 7 / 8, 0.02 * plain[0]) << sharded_run.out;
    EXPECT_NEAR(shards[2], plain[0] - state * 1023 / 1024, 0.02 * plain[0]) << sharded_run.out;
    EXPECT_EQ(rowsOf(sharded_run.out).size(), 3u) << sharded_run.out;
  }
}

TEST(Simulate, StepMsSetsTheComputeTime) {
  CommandResult r = simulate({"--model", "resnet101", "--gpu", "p100", "--link", "pcie,roce-25g",
                              "--gpus-per-node", "4", "--batch-per-device", "64", "--step-ms",
                              "556", "--devices", "1,16,512"});
  for (const TableRow& x : rowsOf(r.out)) EXPECT_NEAR(x.compute_ms, 556, 0.01);
}

TEST(Simulate, SweepPicksTheFastestBucketCapPerCount) {
  CommandResult r =
      simulate({"--model", "resnet50", "--devices", "8,1024", "--sweep", "bucket-mb=1,25,100"});
  int rows = 0;
  for (absl::string_view line : absl::StrSplit(r.out, '\n')) {
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() != 9 || (f[0] != "8" && f[0] != "1024")) continue;
    ++rows;
    // devices, 3 x (time "ms"), best value, efficiency.
    double best = std::stod(f[1]);
    std::string best_value = "1";
    for (int k = 1; k < 3; ++k)
      if (std::stod(f[1 + 2 * k]) < best) {
        best = std::stod(f[1 + 2 * k]);
        best_value = k == 1 ? "25" : "100";
      }
    EXPECT_EQ(f[7], best_value) << line;
  }
  EXPECT_EQ(rows, 2) << r.out;
}

TEST(Simulate, CpuPrintsTheMeasuredStepBesideThePrediction) {
  CommandResult r = simulate({"--model", "lenet", "--gpu", "cpu", "--devices", "1",
                              "--batch-per-device", "16", "--measure-steps", "2"});
  EXPECT_NE(r.out.find("measured ms"), std::string::npos) << r.out;
  ASSERT_EQ(rowsOf(r.out).size(), 1u) << r.out;
}

TEST(Simulate, BadFlagsAreRefusedWithOneLine) {
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases = {
      {{"--devices", "0"}, {"--devices: '0' is not a device count from 1 to 65536"}},
      {{"--devices", "8,x"}, {"--devices: 'x' is not a device count"}},
      {{"--gpu", "tpu"}, {"--gpu: unknown GPU 'tpu'", "or cpu"}},
      {{"--link", "wifi"}, {"--link: unknown link 'wifi'"}},
      {{"--link", "nvlink,ib,pcie"}, {"--link: 'nvlink,ib,pcie' is not one link or two"}},
      {{"--sweep", "lr=1,2"}, {"--sweep: 'lr=1,2' sweeps no known setting"}},
      {{"--sweep", "bucket-mb=0"}, {"--sweep: '0' is not a size in MiB"}},
      {{"--gpu", "cpu", "--devices", "128"}, {"--devices: 128 devices: --gpu cpu", "at most 64"}},
      {{"--gpu", "cpu", "--step-ms", "5"}, {"--step-ms:"}},
      {{"--gpu", "cpu", "--link", "ib"}, {"--link: models GPU links"}},
      {{"--step-ms", "0"}, {"--step-ms", "out of range"}},
      {{"--batch", "64"}, {"--batch"}},
  };
  for (const auto& [args, parts] : cases) {
    std::vector<std::string> argv = {"simulate", "--model", "resnet50"};
    argv.insert(argv.end(), args.begin(), args.end());
    EXPECT_TRUE(isUsageError(runTandem(argv), parts)) << args[0] << " " << args[1];
  }
  EXPECT_TRUE(isUsageError(runTandem({"simulate", "--model", "resnet9"}), {"--model"}));
}

}  // namespace
}  // namespace tandem::testing

// `tandem train --trace`: the file a user opens in Perfetto, written by the real binary.

#include <filesystem>
#include <fstream>
#include <map>
#include <cstdio>
#include <set>
#include <sstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/tools/cli_helpers.h"

namespace tandem::testing {
namespace {

using nlohmann::json;

json readJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
}

// The steps a trace holds, and the tracks (device, stream names) its slices are on.
struct Summary {
  std::set<int> steps;
  std::set<std::pair<std::string, std::string>> tracks;
  size_t arrows = 0;
  std::map<std::string, int> ops;  // op -> slices
};

Summary summarize(const json& trace) {
  Summary s;
  std::map<int, std::string> process;
  std::map<std::pair<int, int>, std::string> thread;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") process[e["pid"]] = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "thread_name")
      thread[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
  }
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "s") ++s.arrows;
    if (e["ph"] != "X") continue;
    s.steps.insert(e["args"]["step"].get<int>());
    s.tracks.insert({process[e["pid"]], thread[{e["pid"].get<int>(), e["tid"].get<int>()}]});
    ++s.ops[e["args"]["op"]];
  }
  return s;
}

// The bar of the issue: LeNet on two devices, one epoch of 2,560 images (10 steps).
TEST(Trace, LenetOnTwoDevicesWritesAPerfettoTimeline) {
  TANDEM_NEED_INSTALLED(whyNoFashionMnist());
  TempDir dir;
  auto r = runTandem({"train", "--model", "lenet", "--devices", "cpu:0,cpu:1", "--epochs", "1",
                      "--limit-train", "2560", "--trace", dir.file("t.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  json trace = readJson(dir.file("t.json"));
  ASSERT_TRUE(trace.is_object()) << "not a JSON object";
  Summary s = summarize(trace);
  EXPECT_EQ(s.steps, (std::set<int>{0, 1, 2}));  // the default --trace-steps 3
  EXPECT_EQ(s.tracks,
            (std::set<std::pair<std::string, std::string>>{
                {"cpu:0", "compute"}, {"cpu:0", "comm"}, {"cpu:1", "compute"}, {"cpu:1", "comm"}}));
  EXPECT_GT(s.arrows, 0u);
  EXPECT_GT(s.ops["conv2d_backward_filter"], 0) << trace.dump().substr(0, 400);
  EXPECT_GT(s.ops["all_reduce"], 0);
}

// --profile reads the same entries: both come out of one run, the profile over every step.
TEST(Trace, GoesWithProfile) {
  TANDEM_NEED_INSTALLED(whyNoFashionMnist());
  TempDir dir;
  auto r = runTandem({"train", "--model", "lenet", "--devices", "2", "--epochs", "1",
                      "--limit-train", "1024", "--limit-test", "256", "--trace", dir.file("t.json"),
                      "--trace-steps", "2", "--profile"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("profile of train_step"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("all_reduce"), std::string::npos) << r.out;
  // ... and how long the steps waited for the loader's batches, of the training time.
  const size_t wait = r.out.find("waiting for the data: ");
  ASSERT_NE(wait, std::string::npos) << r.out;
  double waited = -1, trained = -1;
  ASSERT_EQ(std::sscanf(r.out.c_str() + wait, "waiting for the data: %lf s of the %lf s", &waited,
                        &trained),
            2)
      << r.out.substr(wait);
  EXPECT_GE(waited, 0);
  EXPECT_LE(waited, trained);
  json trace = readJson(dir.file("t.json"));
  ASSERT_TRUE(trace.is_object());
  EXPECT_EQ(summarize(trace).steps, (std::set<int>{0, 1}));
}

// A run with fewer steps than the window writes what it traced and says so.
TEST(Trace, ShortRunWritesWhatItHasAndWarns) {
  TANDEM_NEED_INSTALLED(whyNoFashionMnist());
  TempDir dir;
  auto r = runTandem({"train", "--model", "lenet", "--epochs", "1", "--limit-train", "512",
                      "--batch", "256", "--limit-test", "256", "--trace", dir.file("t.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "tandem: warning: --trace: the run ended after 2 training steps, so " +
                       dir.file("t.json") +
                       " has 1 of the 3 steps asked (the first step is warm-up, not traced)\n");
  json trace = readJson(dir.file("t.json"));
  ASSERT_TRUE(trace.is_object());
  Summary s = summarize(trace);
  EXPECT_EQ(s.steps, (std::set<int>{0}));
  EXPECT_EQ(s.tracks, (std::set<std::pair<std::string, std::string>>{{"cpu:0", "compute"},
                                                                     {"cpu:0", "comm"}}));
}

}  // namespace
}  // namespace tandem::testing

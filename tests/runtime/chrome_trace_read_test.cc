// readChromeTrace: a trace written by chromeTrace reads back to the entries the executor
// traced, and a trace of another module, device count, batch or a file that is no such
// trace is refused in one line naming what differs.

#include <map>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "ir/plan.h"
#include "runtime/chrome_trace.h"
#include "tests/runtime/runtime_test_util.h"

namespace tandem::testing {
namespace {

TrainSetup lenetOn(int devices, int64_t batch = 32) {
  TrainSetup o;
  o.devices = cpus(devices);
  o.batch = batch;
  o.trace = true;
  return o;
}

// Two traced training steps of LeNet on two devices, as train --trace writes them.
struct Traced {
  std::unique_ptr<runtime::Trainer> trainer;
  std::vector<runtime::TraceEntry> entries;
  std::string text;
};

Traced traceTwoSteps() {
  Traced out;
  auto t = makeTrainer(*zoo::modelByName("lenet"), lenetOn(2));
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return out;
  out.trainer = std::move(*t);
  EXPECT_TRUE(out.trainer->initialize().ok());
  out.trainer->executor().takeTrace();  // not the init graph
  for (const OwnedBatch& b : randomBatches(2, 32, 3))
    EXPECT_TRUE(out.trainer->trainStep(b.view()).ok());
  out.entries = out.trainer->executor().takeTrace();
  const ir::Module& m = out.trainer->executor().module();
  out.text = runtime::chromeTrace(m, out.entries, ir::streamWaits(m, *m.graph(ir::kTrainGraph)));
  return out;
}

std::unique_ptr<ir::Module> compiled(const std::string& model, const TrainSetup& o) {
  auto m = training::compileModel(*zoo::modelByName(model), compileOptions(o));
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

TEST(ReadChromeTrace, ReadsBackEveryTracedShare) {
  Traced t = traceTwoSteps();
  ASSERT_FALSE(t.entries.empty());
  const ir::Module& m = t.trainer->executor().module();
  auto spans = runtime::readChromeTrace(m, *m.graph(ir::kTrainGraph), t.text);
  ASSERT_TRUE(spans.ok()) << spans.status();
  ASSERT_EQ(spans->size(), t.entries.size());
  int64_t origin = INT64_MAX;
  for (const runtime::TraceEntry& e : t.entries) origin = std::min(origin, e.start_ns);
  // In the writer's order, each the entry it was written from.
  std::map<std::tuple<const ir::Node*, size_t, int>, int64_t> runs;
  for (size_t i = 0; i < spans->size(); ++i) {
    const runtime::TraceEntry& e = t.entries[i];
    const runtime::TraceSpan& s = (*spans)[i];
    const int stream = e.prefetch ? 2 : e.comm ? 1 : 0;
    EXPECT_EQ(s.node, e.node) << i;
    EXPECT_EQ(s.device, e.device) << i;
    EXPECT_EQ(s.stream, stream) << i;
    EXPECT_EQ(s.step, (runs[{e.node, e.device, stream}]++)) << i;
    EXPECT_NEAR(s.start_us, (e.start_ns - origin) / 1000.0, 1e-3) << i;
    EXPECT_NEAR(s.dur_us, (e.end_ns - e.start_ns) / 1000.0, 1e-3) << i;
  }
}

TEST(ReadChromeTrace, SourceLinesThatMovedStillMatch) {
  Traced t = traceTwoSteps();
  ASSERT_FALSE(t.entries.empty());
  const ir::Module& m = t.trainer->executor().module();
  const std::string moved = absl::StrReplaceAll(t.text, {{"lenet.cc:", "lenet.cc:1"}});
  ASSERT_NE(moved, t.text);
  auto spans = runtime::readChromeTrace(m, *m.graph(ir::kTrainGraph), moved);
  ASSERT_TRUE(spans.ok()) << spans.status();
  EXPECT_EQ(spans->size(), t.entries.size());
}

TEST(ReadChromeTrace, RefusesATraceOfAnotherModule) {
  Traced t = traceTwoSteps();
  ASSERT_FALSE(t.entries.empty());
  struct Case {
    std::unique_ptr<ir::Module> module;
    std::string message;
  };
  std::vector<Case> cases;
  cases.push_back({compiled("lenet", lenetOn(3, 33)),
                   "is a trace of 2 devices (cpu:0, cpu:1), the module runs on 3 (cpu:0, cpu:1, "
                   "cpu:2)"});
  cases.push_back({compiled("resnet18", lenetOn(2)),
                   "is no node of @train_step of resnet18: a trace of another module"});
  cases.push_back(
      {compiled("lenet", lenetOn(2, 64)), "bytes: a trace of another batch, split or precision"});
  for (const Case& c : cases) {
    ASSERT_NE(c.module, nullptr);
    auto spans = runtime::readChromeTrace(*c.module, *c.module->graph(ir::kTrainGraph), t.text);
    ASSERT_FALSE(spans.ok()) << c.message;
    const std::string message(spans.status().message());
    EXPECT_TRUE(absl::StrContains(message, c.message)) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(ReadChromeTrace, RefusesWhatIsNoTraceOfOurs) {
  auto m = compiled("lenet", lenetOn(2));
  ASSERT_NE(m, nullptr);
  const ir::Graph& g = *m->graph(ir::kTrainGraph);
  const std::string devices = R"({"ph":"M","name":"process_name","pid":0,"args":{"name":"cpu:0"}},)"
                              R"({"ph":"M","name":"process_name","pid":1,"args":{"name":"cpu:1"}})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "is not JSON: parse error at line 1, column 2"},
      {"[1, 2]", "is not a Chrome trace (no \"traceEvents\" array)"},
      {R"({"traceEvents": []})", "names no device (no process_name metadata)"},
      {R"({"traceEvents": [)" + devices + "]}", "has no slices"},
      {R"({"traceEvents": [)" + devices + R"(,{"ph":"X","pid":0,"tid":0,"ts":1}]})",
       "event 2 is a slice without pid, tid, ts, dur or args.node"},
      {R"({"traceEvents": [{"ph":"M","name":"process_name","pid":0,"args":{"name":"cpu:0"}},)"
       R"({"ph":"M","name":"process_name","pid":1,"args":{"name":"cuda:1"}}]})",
       "its device 1 is cuda:1, the module's is cpu:1"},
      {R"({"traceEvents": [)" + devices +
           R"(,{"ph":"X","pid":0,"tid":5,"ts":1,"dur":2,"args":{"node":"%x"}}]})",
       "its slice of %x is on process 0, thread 5"},
  };
  for (const auto& [text, expected] : cases) {
    auto spans = runtime::readChromeTrace(*m, g, text);
    ASSERT_FALSE(spans.ok()) << text;
    EXPECT_TRUE(absl::StrContains(spans.status().message(), expected))
        << text << "\n  got: " << spans.status().message();
  }
}

}  // namespace
}  // namespace tandem::testing

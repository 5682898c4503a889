#include "runtime/chrome_trace.h"

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "gtest/gtest.h"
#include "ir/plan.h"
#include "nlohmann/json.hpp"
#include "tests/runtime/runtime_test_util.h"

namespace tandem::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr int kSteps = 2;

// LeNet on two devices with buckets small enough for several (its 0.5 MB of gradients).
TrainSetup severalBuckets() {
  TrainSetup o;
  o.devices = cpus(2);
  o.batch = 32;
  o.bucket_mb = 0.05;
  o.first_bucket_mb = 0.01;
  o.trace = true;
  return o;
}

const ir::Node* lastBackwardOn(const ir::Module& m, size_t device) {
  const ir::Node* last = nullptr;
  for (const auto& n : m.graph(ir::kTrainGraph)->nodes())
    if (n->info().has(ir::kBackward) && n->device() == m.devices()[device]) last = n.get();
  return last;
}

// The buckets `device`'s comm stream issues before the one that reads its last backward
// node's gradient: the ones that can start while backward still runs (a stream is FIFO).
std::set<int64_t> earlyBuckets(const ir::Module& m, size_t device) {
  std::set<int64_t> out;
  const ir::Node* last = lastBackwardOn(m, device);
  for (const auto& n : m.graph(ir::kTrainGraph)->nodes()) {
    if (n->op() != ir::Op::kAllReduce) continue;
    for (const ir::Value* v : ir::readsOf(m, *n, device))
      if (v->def() == last) return out;
    out.insert(n->intAttr("bucket"));
  }
  ADD_FAILURE() << "no bucket reads " << last->describe();
  return out;
}

// Trains kSteps traced steps and returns the trace as JSON, parsed. Each device's last
// backward node is held (inside its traced time) until the device's early buckets have
// started, so that the overlap the design promises is there whatever the machine's load,
// and the test checks that the trace shows it where it happened.
struct Traced {
  std::unique_ptr<runtime::Trainer> trainer;
  json trace;
};

Traced traceSteps() {
  Traced out;
  auto spec = zoo::modelByName("lenet");
  auto t = makeTrainer(*spec, severalBuckets());
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return out;
  out.trainer = std::move(*t);
  runtime::Trainer& trainer = *out.trainer;
  EXPECT_TRUE(trainer.initialize().ok());
  trainer.executor().takeTrace();  // not the init graph
  const ir::Module& m = trainer.executor().module();

  std::mutex mu;
  std::condition_variable cv;
  std::map<size_t, int64_t> started, holds;  // per device: early buckets started, holds
  std::vector<std::set<int64_t>> early = {earlyBuckets(m, 0), earlyBuckets(m, 1)};
  trainer.executor().setBeforeNodeHook([&](const ir::Node& n, size_t device) {
    if (n.op() == ir::Op::kAllReduce && early[device].contains(n.intAttr("bucket"))) {
      std::lock_guard<std::mutex> l(mu);
      ++started[device];
      cv.notify_all();
    }
    if (&n == lastBackwardOn(m, device)) {
      std::unique_lock<std::mutex> l(mu);
      const int64_t want = static_cast<int64_t>(early[device].size()) * ++holds[device];
      EXPECT_TRUE(cv.wait_for(l, 20s, [&] { return started[device] >= want; }))
          << "the early buckets of device " << device << " did not start during backward";
    }
  });
  for (const OwnedBatch& b : randomBatches(kSteps, 32, 7))
    EXPECT_TRUE(trainer.trainStep(b.view()).ok());
  std::vector<runtime::TraceEntry> entries = trainer.executor().takeTrace();
  std::string text =
      runtime::chromeTrace(m, entries, ir::streamWaits(m, *m.graph(ir::kTrainGraph)));
  out.trace = json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(out.trace.is_discarded()) << "not JSON: " << text.substr(0, 300);
  return out;
}

std::vector<json> eventsWithPhase(const json& trace, const std::string& ph) {
  std::vector<json> out;
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == ph) out.push_back(e);
  return out;
}

TEST(ChromeTrace, OneNamedTrackPerDeviceAndStream) {
  Traced t = traceSteps();
  ASSERT_TRUE(t.trace.is_object());
  std::map<int, std::string> processes;
  std::map<std::pair<int, int>, std::string> threads;
  for (const json& e : eventsWithPhase(t.trace, "M")) {
    const int pid = e["pid"];
    if (e["name"] == "process_name") processes[pid] = e["args"]["name"];
    if (e["name"] == "thread_name") threads[{pid, e["tid"].get<int>()}] = e["args"]["name"];
  }
  EXPECT_EQ(processes, (std::map<int, std::string>{{0, "cpu:0"}, {1, "cpu:1"}}));
  EXPECT_EQ(threads,
            (std::map<std::pair<int, int>, std::string>{
                {{0, 0}, "compute"}, {{0, 1}, "comm"}, {{1, 0}, "compute"}, {{1, 1}, "comm"}}));
  std::set<std::pair<int, int>> used;
  for (const json& e : eventsWithPhase(t.trace, "X")) {
    used.insert({e["pid"].get<int>(), e["tid"].get<int>()});
    EXPECT_EQ(e["tid"] == 1, e["cat"] == "comm") << e.dump();
    EXPECT_GE(e["dur"].get<double>(), 0) << e.dump();
  }
  EXPECT_EQ(used.size(), threads.size());
}

// Every share of every node that runs somewhere appears exactly once per step, on its
// device's track of its stream, with its op, scope and bytes.
TEST(ChromeTrace, EveryShareOncePerStep) {
  Traced t = traceSteps();
  ASSERT_TRUE(t.trace.is_object());
  const ir::Module& m = t.trainer->executor().module();
  std::map<std::tuple<std::string, int, int, int>, const json*> seen;  // node, pid, tid, step
  std::vector<json> slices = eventsWithPhase(t.trace, "X");
  for (const json& e : slices) {
    auto key = std::make_tuple(e["args"]["node"].get<std::string>(), e["pid"].get<int>(),
                               e["tid"].get<int>(), e["args"]["step"].get<int>());
    EXPECT_FALSE(seen.contains(key)) << "twice: " << e.dump();
    seen[key] = &e;
  }
  size_t shares = 0;
  for (const auto& n : m.graph(ir::kTrainGraph)->nodes()) {
    const int tid = ir::streamOf(*n) == ir::StreamKind::kComm ? 1 : 0;
    for (size_t d : ir::sharesOf(m, *n))
      for (int step = 0; step < kSteps; ++step) {
        ++shares;
        auto it = seen.find({n->describe(), static_cast<int>(d), tid, step});
        if (it == seen.end()) {
          ADD_FAILURE() << "missing: " << n->describe() << " on device " << d << " step " << step;
          continue;
        }
        const json& args = (*it->second)["args"];
        EXPECT_EQ(args["op"], std::string(n->opName()));
        EXPECT_EQ(args["scope"], n->scope());
        if (ir::streamOf(*n) == ir::StreamKind::kCompute) {  // all its results on d
          int64_t bytes = 0;
          for (size_t i = 0; i < n->numResults(); ++i) bytes += n->result(i)->type().bytes();
          EXPECT_EQ(args["bytes"], bytes) << n->describe();
        }
      }
  }
  EXPECT_EQ(slices.size(), shares);
}

// The overlap of communication with backward, seen in the trace: every bucket that does
// not wait for a device's last backward node starts on that device's comm track before
// that node ends, in every step.
TEST(ChromeTrace, BucketsStartBeforeBackwardEnds) {
  Traced t = traceSteps();
  ASSERT_TRUE(t.trace.is_object());
  const ir::Module& m = t.trainer->executor().module();
  for (size_t d = 0; d < 2; ++d) {
    std::set<int64_t> early = earlyBuckets(m, d);
    ASSERT_GE(early.size(), 2u) << "LeNet should have several buckets here";
    const std::string last = lastBackwardOn(m, d)->describe();
    std::map<int, double> backward_end;
    for (const json& e : eventsWithPhase(t.trace, "X"))
      if (e["pid"] == d && e["args"]["node"] == last)
        backward_end[e["args"]["step"]] = e["ts"].get<double>() + e["dur"].get<double>();
    ASSERT_EQ(backward_end.size(), size_t(kSteps));
    int checked = 0;
    for (const json& e : eventsWithPhase(t.trace, "X")) {
      if (e["pid"] != d || e["args"]["op"] != "all_reduce") continue;
      const std::string name = e["name"];
      for (int64_t b : early)
        if (name == "all_reduce bucket " + std::to_string(b)) {
          ++checked;
          EXPECT_EQ(e["tid"], 1);
          EXPECT_LT(e["ts"].get<double>(), backward_end[e["args"]["step"]]) << name;
        }
    }
    EXPECT_EQ(checked, static_cast<int>(early.size()) * kSteps);
  }
}

// Each cross-stream wait is an arrow per step: an "s" inside the producer's slice and an
// "f" inside the consumer's, with the same id, bound to the enclosing slices.
TEST(ChromeTrace, WaitsAreFlowArrowsBetweenTheirSlices) {
  Traced t = traceSteps();
  ASSERT_TRUE(t.trace.is_object());
  const ir::Module& m = t.trainer->executor().module();
  auto waits = ir::streamWaits(m, *m.graph(ir::kTrainGraph));
  std::map<int64_t, json> starts, finishes;
  for (const json& e : eventsWithPhase(t.trace, "s")) starts[e["id"]] = e;
  for (const json& e : eventsWithPhase(t.trace, "f")) finishes[e["id"]] = e;
  EXPECT_EQ(starts.size(), waits.size() * kSteps);
  ASSERT_EQ(finishes.size(), starts.size());
  std::vector<json> slices = eventsWithPhase(t.trace, "X");
  auto enclosing = [&](const json& flow) -> const json* {
    for (const json& s : slices)
      if (s["pid"] == flow["pid"] && s["tid"] == flow["tid"] && s["ts"] <= flow["ts"] &&
          flow["ts"].get<double>() <= s["ts"].get<double>() + s["dur"].get<double>())
        return &s;
    return nullptr;
  };
  for (const auto& [id, s] : starts) {
    const json& f = finishes[id];
    EXPECT_EQ(s["bp"], "e");
    EXPECT_EQ(f["bp"], "e");
    const json* from = enclosing(s);
    const json* at = enclosing(f);
    ASSERT_NE(from, nullptr) << s.dump();
    ASSERT_NE(at, nullptr) << f.dump();
    EXPECT_EQ((*from)["args"]["step"], (*at)["args"]["step"]) << s.dump();
    // The consumer ran after its producer ended: what the event enforced.
    EXPECT_GE((*at)["ts"].get<double>() + 1e-3,
              (*from)["ts"].get<double>() + (*from)["dur"].get<double>())
        << (*from)["name"] << " -> " << (*at)["name"];
  }
}

}  // namespace
}  // namespace tandem::testing

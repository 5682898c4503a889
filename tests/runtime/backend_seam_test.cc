// The executor speaks only the backend seam: a backend that runs nothing and records what
// it is asked (tests/runtime/recording_backend.h), standing in for the CPU backend, loads
// and steps a LeNet module, and what it saw on each stream is what `tandem dump --format
// streams` says the streams do.

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "backend/backend.h"
#include "frontend/zoo/zoo.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "runtime/stream_waits.h"
#include "tests/runtime/recording_backend.h"
#include "tests/runtime/runtime_test_util.h"
#include "tests/test_util.h"
#include "tools/driver/compile.h"

namespace tandem::testing {
namespace {

std::unique_ptr<ir::Module> lenetOn(int devices, double bucket_mb) {
  driver::CompileOptions c;
  c.build.batch = 32;
  c.pipeline.devices = cpus(devices);
  c.pipeline.bucket_mb = bucket_mb;
  c.pipeline.first_bucket_mb = bucket_mb / 4;
  auto m = driver::compileModel(*zoo::modelByName("lenet"), c);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

// The recorder's streams in printStreams' layout.
std::string recordedStreams(const Recorder& r, const ir::Module& m, absl::string_view graph) {
  auto lines = r.lines();
  std::string out;
  for (const ir::Device& d : m.devices())
    for (const char* kind : {"compute", "comm"}) {
      const std::string stream = absl::StrCat(ir::toString(d), "/", kind);
      absl::StrAppend(&out, "stream ", stream, " of @", graph, ":\n");
      for (const std::string& line : lines[stream]) absl::StrAppend(&out, line, "\n");
    }
  return out;
}

TEST(BackendSeam, TheExecutorRunsOnARecordingBackendAsDumpSaysItWould) {
  Recorder recorder;
  RecordingBackend backend(recorder);
  backend::ScopedBackendOverride use(backend);  // cpu:N devices now come from it

  auto module = lenetOn(2, 0.2);
  ASSERT_NE(module, nullptr);
  const std::string expected = runtime::printStreams(*module, *module->graph(ir::kTrainGraph));
  ASSERT_NE(expected.find("    wait cpu:1/compute after "), std::string::npos) << expected;
  size_t compute_nodes = 0;
  for (const auto& g : module->graphs())
    for (const auto& n : g->nodes())
      compute_nodes += ir::streamOf(*n) == ir::StreamKind::kCompute && n->op() != ir::Op::kInput &&
                       n->op() != ir::Op::kParam;

  auto ex = runtime::Executor::create(std::move(module));
  ASSERT_TRUE(ex.ok()) << ex.status();
  (*ex)->setBeforeNodeHook(
      [&](const ir::Node& n, size_t) { recorder.setLabel(runtime::describeWork(n)); });
  EXPECT_EQ(recorder.counter("makeKernel"), static_cast<int>(compute_nodes));
  EXPECT_EQ(recorder.counter("createCommunicators"), 1);  // one group: both devices

  ASSERT_TRUE((*ex)->run(ir::kInitGraph, {}).ok());
  recorder.clear();
  auto batch = randomBatches(1, 32, 1);
  backend::TensorView in[2] = {{batch[0].images.data(), {ir::DType::kF32, {32, 1, 28, 28}}},
                               {batch[0].labels.data(), {ir::DType::kI32, {32}}}};
  auto out = (*ex)->run(ir::kTrainGraph, in);
  ASSERT_TRUE(out.ok()) << out.status();

  const ir::Module& m = (*ex)->module();
  EXPECT_EQ(recordedStreams(recorder, m, ir::kTrainGraph), expected);
  // The batch in: one slice copy per device; the loss and correct count out: one copy each.
  EXPECT_EQ(recorder.counter("copySliceFromHost"), 4);
  EXPECT_EQ(recorder.counter("copyToHost"), 2);
  // Each collective's shares are issued between a group start and end.
  EXPECT_EQ(recorder.counter("groupStart"), recorder.counter("groupEnd"));
  EXPECT_GE(recorder.counter("allReduce"), 2 * 3);  // >= 1 gradient bucket + loss + correct
}

// Where the backend can record a step (CUDA graphs), the executor runs each graph plainly
// kStepsBeforeRecording times, records the next step and replays it, and replays every
// later step without enqueueing anything; tracing and record_steps=false run plain steps.
TEST(BackendSeam, StepsAreRecordedOnceAndReplayed) {
  struct Case {
    runtime::ExecutorOptions options;
    bool records;
  };
  for (const Case& c : {Case{{}, true}, Case{{.trace = true}, false},
                        Case{{.record_steps = false}, false}}) {
    Recorder recorder;
    RecordingBackend backend(recorder, /*records_steps=*/true);
    backend::ScopedBackendOverride use(backend);
    auto ex = runtime::Executor::create(lenetOn(2, 0.2), c.options);
    ASSERT_TRUE(ex.ok()) << ex.status();
    ASSERT_TRUE((*ex)->run(ir::kInitGraph, {}).ok());
    recorder.clear();
    auto batch = randomBatches(1, 32, 1);
    backend::TensorView in[2] = {{batch[0].images.data(), {ir::DType::kF32, {32, 1, 28, 28}}},
                                 {batch[0].labels.data(), {ir::DType::kI32, {32}}}};
    int launches_per_step = 0;
    constexpr int kSteps = 6;
    for (int step = 1; step <= kSteps; ++step) {
      auto out = (*ex)->run(ir::kTrainGraph, in);
      ASSERT_TRUE(out.ok()) << out.status();
      if (step == 1) launches_per_step = recorder.counter("launch");
    }
    ASSERT_GT(launches_per_step, 0);
    const int enqueued = c.records ? runtime::kStepsBeforeRecording + 1 : kSteps;
    EXPECT_EQ(recorder.counter("launch"), enqueued * launches_per_step);
    EXPECT_EQ(recorder.counter("record"), c.records ? 1 : 0);
    EXPECT_EQ(recorder.counter("recorded"), c.records ? 1 : 0);
    EXPECT_EQ(recorder.counter("replay"), c.records ? kSteps - runtime::kStepsBeforeRecording : 0);
    // Outputs come back every step, replayed or not: the copies are part of the recording.
    EXPECT_EQ(recorder.counter("copyToHost"), enqueued * 2);
  }
}

// ExecutorOptions reach every device (as DeviceOptions).
TEST(BackendSeam, ExecutorOptionsReachTheDevices) {
  Recorder recorder;
  RecordingBackend backend(recorder);
  backend::ScopedBackendOverride use(backend);
  auto ex = runtime::Executor::create(lenetOn(2, 0.2),
                                      {.conv_algorithm = backend::ConvAlgorithm::kDirect});
  ASSERT_TRUE(ex.ok()) << ex.status();
  EXPECT_EQ(recorder.counter("createDevice with direct convolutions"), 2);
}

// A module whose device kind this build lacks is refused at load, naming the device.
TEST(BackendSeam, AMissingBackendIsNamed) {
  auto m = buildZooModel("lenet", 8);
  ASSERT_TRUE(runPipeline(*m,
                          "autodiff,replicate{devices=[cuda:0]},insert-collectives,dce,schedule,"
                          "plan-memory")
                  .ok());
  auto ex = runtime::Executor::create(std::move(m));
  if (backend::backendFor(ir::DeviceKind::kCuda).ok()) {
    // A build with nvcc has the kind; a machine without a GPU lacks the device.
    if (ex.ok()) GTEST_SKIP() << "this machine runs cuda:0";
    EXPECT_TRUE(absl::StartsWith(ex.status().message(), "cuda:0: no CUDA GPU on this machine"))
        << ex.status();
    return;
  }
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.status().message(),
            "cuda:0: this build has no cuda backend (use cpu:N devices; docs/GPU.md says what a "
            "CUDA build needs)");
}

// The executor never plans memory itself: a plan missing or made before the last rewrite
// is an error naming the graph.
TEST(BackendSeam, AMissingOrStaleMemoryPlanIsAnError) {
  auto m = buildZooModel("lenet", 8);
  ASSERT_TRUE(
      runPipeline(*m, "autodiff,replicate{devices=2},insert-collectives,dce,schedule").ok());
  auto ex = runtime::Executor::create(std::move(m));
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.status().message(),
            "graph @init of module @lenet has no memory plan: run plan-memory as the pipeline's "
            "last pass (the executor does not plan memory itself)");
}

}  // namespace
}  // namespace tandem::testing

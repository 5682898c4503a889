// What the executor does when a piece of a step fails or cannot be had, on the recording
// backend (tests/runtime/recording_backend.h), which can refuse a collective or a
// recording on demand: the hazards a reading of the CUDA backend found (issue 26), checked
// without a GPU.

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "backend/backend.h"
#include "frontend/zoo/zoo.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "tests/runtime/recording_backend.h"
#include "tests/runtime/runtime_test_util.h"
#include "train/compile.h"

namespace tandem::testing {
namespace {

std::unique_ptr<ir::Module> lenetOn(int devices) {
  training::CompileOptions c;
  c.build.batch = 32;
  c.pipeline.devices = cpus(devices);
  auto m = training::compileModel(*zoo::modelByName("lenet"), c);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

struct Batch {
  OwnedBatch owned = randomBatches(1, 32, 1)[0];
  backend::TensorView in[2] = {{owned.images.data(), {ir::DType::kF32, {32, 1, 28, 28}}},
                               {owned.labels.data(), {ir::DType::kI32, {32}}}};
};

// An error while a collective's group is open (one rank's share refused) closes the group
// before the step returns: NCCL's group depth stays balanced (else every later NCCL call
// of the thread would be queued and never launched) and a same-GPU group flushes again.
TEST(ExecutorFailures, AFailedShareClosesItsCollectiveGroup) {
  Recorder recorder;
  RecordingBackend backend(recorder);
  backend::ScopedBackendOverride use(backend);
  auto ex = runtime::Executor::create(lenetOn(2));
  ASSERT_TRUE(ex.ok()) << ex.status();
  ASSERT_TRUE((*ex)->run(ir::kInitGraph, {}).ok());
  recorder.clear();
  recorder.fail("allReduce on rank 1");
  Batch b;
  auto out = (*ex)->run(ir::kTrainGraph, b.in);
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(absl::StrContains(out.status().message(), "all_reduce")) << out.status();
  EXPECT_TRUE(absl::StrContains(out.status().message(), "rank 1 refused")) << out.status();
  EXPECT_GT(recorder.counter("groupStart"), 0);
  EXPECT_EQ(recorder.counter("groupStart"), recorder.counter("groupEnd"));

  // The group is usable again: the next step runs whole.
  recorder.clear();
  auto again = (*ex)->run(ir::kTrainGraph, b.in);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(recorder.counter("groupStart"), recorder.counter("groupEnd"));
}

// A recording that cannot be made costs the run its speed-up, not the run: the step runs
// plainly, the executor warns once saying why, and every later step is plain (nothing is
// recorded again). (A replay that fails is a launch that fails: an error.)
TEST(ExecutorFailures, AFailedRecordingFallsBackToPlainStepsWithOneWarning) {
  for (const char* refused : {"makeStepRecorder", "record", "recorded"}) {
    SCOPED_TRACE(refused);
    Recorder recorder;
    RecordingBackend backend(recorder, /*records_steps=*/true);
    backend::ScopedBackendOverride use(backend);
    std::vector<std::string> warnings;
    runtime::ExecutorOptions options;
    options.warn = [&](const std::string& line) { warnings.push_back(line); };
    auto ex = runtime::Executor::create(lenetOn(2), options);
    ASSERT_TRUE(ex.ok()) << ex.status();
    ASSERT_TRUE((*ex)->run(ir::kInitGraph, {}).ok());
    recorder.clear();
    recorder.fail(refused);
    Batch b;
    int launches_per_step = 0;
    constexpr int kSteps = 6;
    for (int step = 1; step <= kSteps; ++step) {
      auto out = (*ex)->run(ir::kTrainGraph, b.in);
      ASSERT_TRUE(out.ok()) << "step " << step << ": " << out.status();
      if (step == 1) launches_per_step = recorder.counter("launch");
    }
    ASSERT_GT(launches_per_step, 0);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_TRUE(absl::StrContains(warnings[0], "@train_step")) << warnings[0];
    EXPECT_TRUE(absl::StrContains(warnings[0], "running plain steps")) << warnings[0];
    // Every step ran its kernels plainly (a failed recording enqueued nothing that ran;
    // the recording's own enqueue is counted too where it got that far).
    const std::string what(refused);
    const int recorded_enqueues = what == "recorded" ? 1 : 0;
    EXPECT_EQ(recorder.counter("launch"), (kSteps + recorded_enqueues) * launches_per_step);
    EXPECT_LE(recorder.counter("record"), 1);  // one try, never again
    // Outputs came back from every step.
    EXPECT_EQ(recorder.counter("copyToHost"), (kSteps + recorded_enqueues) * 2);
  }
}

// Timing a traced step takes stamps (events on a GPU, read after the step), not host
// callbacks, which on a GPU would stall every stream for a host round trip per node.
TEST(ExecutorFailures, TracedStepsTimeWithStampsNotHostCallbacks) {
  Recorder recorder;
  RecordingBackend backend(recorder);
  backend::ScopedBackendOverride use(backend);
  auto ex = runtime::Executor::create(lenetOn(2), {.trace = true});
  ASSERT_TRUE(ex.ok()) << ex.status();
  ASSERT_TRUE((*ex)->run(ir::kInitGraph, {}).ok());
  (void)(*ex)->takeTrace();
  recorder.clear();
  Batch b;
  ASSERT_TRUE((*ex)->run(ir::kTrainGraph, b.in).ok());
  const std::vector<runtime::TraceEntry> trace = (*ex)->takeTrace();
  ASSERT_FALSE(trace.empty());
  EXPECT_EQ(recorder.counter("hostCallback"), 0);
  EXPECT_EQ(recorder.counter("stamp"), static_cast<int>(2 * trace.size()));
  for (const runtime::TraceEntry& e : trace) {
    EXPECT_GT(e.start_ns, 0) << e.node->describe();
    EXPECT_GE(e.end_ns, e.start_ns) << e.node->describe();
  }
}

// A label past the last class is refused when the batch is handed over, naming the input,
// the sample and the loss, on a real backend: the CPU kernel would read past the row of
// logits (an assert only), the CUDA one made the loss NaN.
TEST(ExecutorFailures, ALabelPastTheLastClassIsNamedWithItsSample) {
  auto ex = runtime::Executor::create(lenetOn(2));
  ASSERT_TRUE(ex.ok()) << ex.status();
  ASSERT_TRUE((*ex)->run(ir::kInitGraph, {}).ok());
  Batch b;
  b.owned.labels[17] = 10;  // LeNet has 10 classes: 0 to 9
  auto out = (*ex)->run(ir::kTrainGraph, b.in);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(out.status().message());
  EXPECT_TRUE(absl::StrContains(message, "sample 17 of the batch has label 10")) << message;
  EXPECT_TRUE(absl::StrContains(message, "10 classes")) << message;
  EXPECT_TRUE(absl::StrContains(message, "softmax_cross_entropy")) << message;

  // Padding (a negative label) is fine, and so is the last class.
  b.owned.labels[17] = -1;
  b.owned.labels[18] = 9;
  auto padded = (*ex)->run(ir::kTrainGraph, b.in);
  EXPECT_TRUE(padded.ok()) << padded.status();
}

}  // namespace
}  // namespace tandem::testing

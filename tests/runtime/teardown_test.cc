// A loaded module comes apart in dependency order: recorded steps, kernels, events and
// communicators before the devices whose streams and handles they use. A CUDA graph's
// teardown reads its origin stream (cudaSetDevice(origin()->gpu())); destroying the devices
// first made every exit after a recorded run a use after free. The recording backend's
// step recorder touches its streams when it goes away, as the CUDA one does, and its
// streams say when they are gone. Built twice: in runtime_tests, and under
// AddressSanitizer as runtime_asan_tests (tests/CMakeLists.txt), where the read of a freed
// stream is a report of its own.

#include <string>

#include "backend/backend.h"
#include "frontend/zoo/zoo.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "tests/runtime/recording_backend.h"
#include "tests/runtime/runtime_test_util.h"
#include "train/compile.h"

namespace tandem::testing {
namespace {

TEST(Teardown, RecordedStepsGoBeforeTheStreamsTheyRecorded) {
  Recorder recorder;
  RecordingBackend backend(recorder, /*records_steps=*/true, /*prefetches=*/true);
  backend::ScopedBackendOverride use(backend);
  training::CompileOptions c;
  c.build.batch = 32;
  c.pipeline.devices = cpus(2);
  auto module = training::compileModel(*zoo::modelByName("lenet"), c);
  ASSERT_TRUE(module.ok()) << module.status();
  {
    auto ex = runtime::Executor::create(*std::move(module));
    ASSERT_TRUE(ex.ok()) << ex.status();
    ASSERT_TRUE((*ex)->run(ir::kInitGraph, {}).ok());
    OwnedBatch b = randomBatches(1, 32, 1)[0];
    backend::TensorView in[2] = {{b.images.data(), {ir::DType::kF32, {32, 1, 28, 28}}},
                                 {b.labels.data(), {ir::DType::kI32, {32}}}};
    for (int step = 0; step < runtime::kStepsBeforeRecording + 3; ++step)
      ASSERT_TRUE((*ex)->run(ir::kTrainGraph, in).ok());
    ASSERT_EQ(recorder.counter("record"), 2);  // one recording per input slot
  }                                            // the executor and its loaded module go here
  EXPECT_TRUE(recorder.outlivedList().empty())
      << recorder.outlivedList().size() << " times: " << recorder.outlivedList()[0];
  // Both recordings let go of both streams of both devices while they were alive.
  EXPECT_EQ(recorder.counter("released cpu:0/compute"), 2);
  EXPECT_EQ(recorder.counter("released cpu:1/comm"), 2);
}

}  // namespace
}  // namespace tandem::testing

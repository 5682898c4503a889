// The executor speaks only the backend seam: a backend that runs nothing and records what
// it is asked (tests/runtime/recording_backend.h), standing in for the CPU backend, loads
// and steps a LeNet module, and what it saw on each stream is what `tandem dump --format
// streams` says the streams do.

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "backend/backend.h"
#include "frontend/zoo/zoo.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/plan.h"
#include "ir/target.h"
#include "runtime/chrome_trace.h"
#include "runtime/data/batch_loader.h"
#include "runtime/executor.h"
#include "runtime/trainer.h"
#include "tests/runtime/recording_backend.h"
#include "tests/runtime/runtime_test_util.h"
#include "tests/test_util.h"
#include "train/compile.h"

namespace tandem::testing {
namespace {

std::unique_ptr<ir::Module> lenetOn(int devices, double bucket_mb) {
  training::CompileOptions c;
  c.build.batch = 32;
  c.pipeline.devices = cpus(devices);
  c.pipeline.bucket_mb = bucket_mb;
  c.pipeline.first_bucket_mb = bucket_mb / 4;
  auto m = training::compileModel(*zoo::modelByName("lenet"), c);
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
  const std::string expected = ir::printStreams(*module, *module->graph(ir::kTrainGraph));
  ASSERT_NE(expected.find("    wait cpu:1/compute after "), std::string::npos) << expected;
  size_t compute_nodes = 0;
  for (const auto& g : module->graphs())
    for (const auto& n : g->nodes())
      compute_nodes += ir::streamOf(*n) == ir::StreamKind::kCompute && n->op() != ir::Op::kInput &&
                       n->op() != ir::Op::kParam;

  auto ex = runtime::Executor::create(std::move(module));
  ASSERT_TRUE(ex.ok()) << ex.status();
  (*ex)->setBeforeNodeHook(
      [&](const ir::Node& n, size_t) { recorder.setLabel(ir::describeWork(n)); });
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

// A kernel whose target declares a workspace gets the plan's bytes of its device's arena
// from the loader (Kernel::bindWorkspace), once, when the module loads: it allocates none.
TEST(BackendSeam, EachKernelIsHandedItsPlannedWorkspace) {
  const ir::TargetInfo cpu = *ir::findTarget(kind("cpu"));
  ir::TargetInfo declaring = cpu;  // cpu's facts, with a workspace for every convolution
  declaring.max_workspace_bytes = 1 << 20;
  declaring.workspace_bytes = [](const ir::Node& n) -> int64_t {
    return n.op() == ir::Op::kConv2d ? 1000 : 0;
  };
  ir::registerTarget(declaring);
  struct Restore {
    const ir::TargetInfo& facts;
    ~Restore() { ir::registerTarget(facts); }
  } restore{cpu};
  Recorder recorder;
  RecordingBackend backend(recorder);
  backend::ScopedBackendOverride use(backend);

  auto module = lenetOn(2, 0.2);
  ASSERT_NE(module, nullptr);
  int planned = 0;
  for (const auto& g : module->graphs()) {
    if (g->plan() == nullptr) continue;
    for (const auto& n : g->nodes())
      if (const auto& ws = g->plan()->of(*n).workspace) {
        EXPECT_EQ(n->op(), ir::Op::kConv2d) << n->describe();
        EXPECT_EQ(ws->bytes, 1024) << n->describe();  // 1000 rounded up to the alignment
        ++planned;
      }
  }
  EXPECT_GT(planned, 0);
  auto ex = runtime::Executor::create(std::move(module));
  ASSERT_TRUE(ex.ok()) << ex.status();
  EXPECT_EQ(recorder.counter("bindWorkspace 1024"), planned);
  for (const void* p : recorder.addresses("workspace")) EXPECT_NE(p, nullptr);
}

// Where the backend can record a step (CUDA graphs), the executor runs each graph plainly
// kStepsBeforeRecording times, then records a step once per input slot (the split reads
// the slot's staging, at the slot's address) and replays it, and replays every later step
// without enqueueing anything; tracing and record_steps=false run plain steps.
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
    const int slots = 2;
    const int enqueued = c.records ? runtime::kStepsBeforeRecording + slots : kSteps;
    EXPECT_EQ(recorder.counter("launch"), enqueued * launches_per_step);
    EXPECT_EQ(recorder.counter("record"), c.records ? slots : 0);
    EXPECT_EQ(recorder.counter("recorded"), c.records ? slots : 0);
    EXPECT_EQ(recorder.counter("replay"), c.records ? kSteps - runtime::kStepsBeforeRecording : 0);
    // Outputs come back every step, replayed or not: the copies are part of the recording.
    EXPECT_EQ(recorder.counter("copyToHost"), enqueued * 2);
  }
}

// The input pipeline on devices with a prefetch stream (as CUDA devices have): inputs
// handed over are copied in on the prefetch streams, slice by slice into buffers of the
// device's own, alternating between two slots; each step's comm stream first waits for
// its slot's copies, then its splits copy the slices on the device. Inputs handed over
// between launch and wait are copied after the whole step was enqueued, so they overlap it.
TEST(BackendSeam, TheNextBatchIsCopiedInOnThePrefetchStreamsWhileTheStepRuns) {
  Recorder recorder;
  RecordingBackend backend(recorder, /*records_steps=*/false, /*prefetches=*/true);
  backend::ScopedBackendOverride use(backend);
  auto ex = runtime::Executor::create(lenetOn(2, 0.2));
  ASSERT_TRUE(ex.ok()) << ex.status();
  (*ex)->setBeforeNodeHook(
      [&](const ir::Node& n, size_t) { recorder.setLabel(ir::describeWork(n)); });
  ASSERT_TRUE((*ex)->run(ir::kInitGraph, {}).ok());
  const ir::Module& m = (*ex)->module();
  std::vector<std::string> splits;  // how the streams name the images' and labels' splits
  for (const auto& n : m.graph(ir::kTrainGraph)->nodes())
    if (n->op() == ir::Op::kSplit) splits.push_back(ir::describeWork(*n));
  ASSERT_EQ(splits.size(), 2u);
  recorder.clear();

  auto batches = randomBatches(3, 32, 1);
  auto inputs = [&](int k) {
    return std::vector<backend::TensorView>{
        {batches[k].images.data(), {ir::DType::kF32, {32, 1, 28, 28}}},
        {batches[k].labels.data(), {ir::DType::kI32, {32}}}};
  };
  auto onPrefetchStreams = [](const std::vector<std::string>& lines, size_t from) {
    for (size_t i = from; i < lines.size(); ++i)  // "cpu:1/prefetch:   split %x"
      if (!absl::EndsWith(lines[i].substr(0, lines[i].find(": ")), "/prefetch")) return false;
    return true;
  };
  ASSERT_TRUE((*ex)->prefetch(ir::kTrainGraph, inputs(0)).ok());
  EXPECT_TRUE((*ex)->prefetched(ir::kTrainGraph));
  EXPECT_EQ(recorder.sequence().size(), 4u);  // 2 devices x 2 inputs, nothing else
  EXPECT_TRUE(onPrefetchStreams(recorder.sequence(), 0));
  constexpr int kSteps = 3;
  for (int k = 0; k < kSteps; ++k) {
    ASSERT_TRUE((*ex)->launch(ir::kTrainGraph).ok());
    EXPECT_FALSE((*ex)->prefetched(ir::kTrainGraph));
    const size_t step_enqueued = recorder.sequence().size();
    if (k + 1 < kSteps) {
      ASSERT_TRUE((*ex)->prefetch(ir::kTrainGraph, inputs(k + 1)).ok());
      // The next batch's copies come after everything of step k, on the prefetch streams.
      EXPECT_EQ(recorder.sequence().size(), step_enqueued + 4);
      EXPECT_TRUE(onPrefetchStreams(recorder.sequence(), step_enqueued));
    }
    auto out = (*ex)->wait();
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->size(), 2u);
  }

  auto lines = recorder.lines();
  for (const ir::Device& d : m.devices()) {
    const std::string dev = ir::toString(d);
    SCOPED_TRACE(dev);
    // The prefetch stream: the images' and labels' slices, batch after batch.
    std::vector<std::string> copies;
    for (int k = 0; k < kSteps; ++k)
      for (const std::string& split : splits) copies.push_back("  " + split);
    EXPECT_EQ(lines[dev + "/prefetch"], copies);
    // The comm stream: each step opens with the wait for its slot's copies, then the
    // splits (device copies), and waits for nothing else of the prefetch stream.
    const std::vector<std::string>& comm = lines[dev + "/comm"];
    const std::string wait = absl::StrCat("    wait ", dev, "/prefetch after ", splits[1]);
    int waits = 0;
    for (size_t i = 0; i < comm.size(); ++i) {
      if (!absl::StrContains(comm[i], "/prefetch")) continue;
      EXPECT_EQ(comm[i], wait);
      ASSERT_LT(i + 2, comm.size());
      EXPECT_EQ(comm[i + 1], "  " + splits[0]);
      EXPECT_EQ(comm[i + 2], "  " + splits[1]);
      ++waits;
    }
    EXPECT_EQ(waits, kSteps);
    // Two slots: steps 0 and 2 read the same buffers, step 1 the others, and each step
    // reads what the prefetch stream wrote for its batch; the split never reads the host.
    const std::vector<const void*> written = recorder.addresses("into " + dev + "/prefetch");
    const std::vector<const void*> read = recorder.addresses("device copy on " + dev + "/comm");
    EXPECT_EQ(read, written);
    ASSERT_EQ(read.size(), 2u * kSteps);
    EXPECT_NE(read[0], read[2]);
    EXPECT_NE(read[1], read[3]);
    EXPECT_EQ(read[0], read[4]);
    EXPECT_EQ(read[1], read[5]);
    EXPECT_TRUE(recorder.addresses("from host on " + dev + "/comm").empty());
  }
}

// A data set of `count` 28x28 images with labels 0..9 in turn.
runtime::data::Dataset syntheticData(int64_t count) {
  runtime::data::Dataset d;
  d.count = d.available = count;
  d.rows = d.cols = 28;
  d.images.assign(static_cast<size_t>(count * 28 * 28), 0.5f);
  for (int64_t i = 0; i < count; ++i) d.labels.push_back(static_cast<int32_t>(i % 10));
  return d;
}

// The issue order of all streams as letters: P a copy on a prefetch stream, W a comm
// stream's wait for one (a step begins), S a run of the step's other work.
std::string pipelineShape(const std::vector<std::string>& sequence) {
  std::string out;
  for (const std::string& line : sequence) {
    const char c = absl::EndsWith(line.substr(0, line.find(": ")), "/prefetch") ? 'P'
                   : absl::StrContains(line, "/prefetch after ")                ? 'W'
                                                                                : 'S';
    if (c != 'S' || out.empty() || out.back() != 'S') out.push_back(c);
  }
  return out;
}

// The Trainer hands batch k+1 over after step k is enqueued and before it waits for it,
// in training and in evaluation; the last batch of a pass hands nothing more over.
TEST(BackendSeam, TheTrainerHandsTheNextBatchOverWhileTheStepRuns) {
  Recorder recorder;
  RecordingBackend backend(recorder, /*records_steps=*/false, /*prefetches=*/true);
  backend::ScopedBackendOverride use(backend);
  auto trainer = runtime::Trainer::create(lenetOn(2, 0.2), {"accuracy"});
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_TRUE((*trainer)->initialize().ok());
  const runtime::data::Dataset train = syntheticData(3 * 32 + 5), test = syntheticData(40);
  runtime::data::BatchLoader train_loader(train, 32, true, 1, /*drop_last=*/true);
  runtime::data::BatchLoader test_loader(test, 32, false, 1, /*drop_last=*/false);

  recorder.clear();
  train_loader.startEpoch(1);
  auto r = (*trainer)->trainEpoch(train_loader);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 3);
  // 2 devices x 2 inputs per batch.
  EXPECT_EQ(pipelineShape(recorder.sequence()), "PPPPWWSPPPPWWSPPPPWWS");

  recorder.clear();
  test_loader.startEpoch(0);
  auto t = (*trainer)->evaluate(test_loader);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->steps, 2);
  EXPECT_EQ(t->examples, 40);
  EXPECT_EQ(pipelineShape(recorder.sequence()), "PPPPWWSPPPPWWS");

  // An epoch stopped after its first step leaves the next batch handed over; the next
  // epoch hands its own first batch over again rather than train on that one.
  recorder.clear();
  train_loader.startEpoch(2);
  r = (*trainer)->trainEpoch(train_loader, [](const runtime::StepReport&) { return false; });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->stopped);
  EXPECT_EQ(pipelineShape(recorder.sequence()), "PPPPWWSPPPP");
  EXPECT_TRUE((*trainer)->executor().prefetched(ir::kTrainGraph));
  recorder.clear();
  train_loader.startEpoch(3);
  r = (*trainer)->trainEpoch(train_loader);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(pipelineShape(recorder.sequence()), "PPPPWWSPPPPWWSPPPPWWS");
}

// A step recorded once per slot replays after the comm streams' waits for its slot's
// copies, which stay outside the recording; prefetch_inputs=false is the step as before.
TEST(BackendSeam, RecordedStepsReplayAfterTheirSlotsCopies) {
  for (bool prefetch : {true, false}) {
    SCOPED_TRACE(prefetch ? "prefetch" : "no prefetch");
    Recorder recorder;
    RecordingBackend backend(recorder, /*records_steps=*/true, /*prefetches=*/true);
    backend::ScopedBackendOverride use(backend);
    auto ex = runtime::Executor::create(lenetOn(2, 0.2), {.prefetch_inputs = prefetch});
    ASSERT_TRUE(ex.ok()) << ex.status();
    ASSERT_TRUE((*ex)->run(ir::kInitGraph, {}).ok());
    recorder.clear();
    auto batch = randomBatches(1, 32, 1);
    backend::TensorView in[2] = {{batch[0].images.data(), {ir::DType::kF32, {32, 1, 28, 28}}},
                                 {batch[0].labels.data(), {ir::DType::kI32, {32}}}};
    constexpr int kSteps = 6;
    for (int step = 0; step < kSteps; ++step) ASSERT_TRUE((*ex)->run(ir::kTrainGraph, in).ok());
    EXPECT_EQ(recorder.counter("record"), 2);
    EXPECT_EQ(recorder.counter("replay"), kSteps - runtime::kStepsBeforeRecording);
    auto lines = recorder.lines();
    for (const ir::Device& d : (*ex)->module().devices()) {
      const std::string dev = ir::toString(d);
      int waits = 0;
      for (const std::string& line : lines[dev + "/comm"])
        waits += absl::StrContains(line, "wait " + dev + "/prefetch");
      EXPECT_EQ(waits, prefetch ? kSteps : 0) << dev;
      EXPECT_EQ(lines[dev + "/prefetch"].size(), prefetch ? 2u * kSteps : 0u) << dev;
    }
    // Without prefetch the splits copy from host staging, on the comm streams, in the
    // steps enqueued (not in the replays, which enqueue nothing here).
    const int enqueued = runtime::kStepsBeforeRecording + 2;
    EXPECT_EQ(recorder.counter("copySliceFromHost"), 2 * 2 * (prefetch ? kSteps : enqueued));
  }
}

// The input pipeline's misuses and failures are errors that say what to do, naming the
// node, the device's stream and the call.
TEST(BackendSeam, InputPipelineErrorsAreNamed) {
  Recorder recorder;
  RecordingBackend backend(recorder, /*records_steps=*/false, /*prefetches=*/true);
  backend::ScopedBackendOverride use(backend);
  auto ex = runtime::Executor::create(lenetOn(2, 0.2));
  ASSERT_TRUE(ex.ok()) << ex.status();
  ASSERT_TRUE((*ex)->run(ir::kInitGraph, {}).ok());
  auto batch = randomBatches(1, 32, 1);
  backend::TensorView in[2] = {{batch[0].images.data(), {ir::DType::kF32, {32, 1, 28, 28}}},
                               {batch[0].labels.data(), {ir::DType::kI32, {32}}}};

  absl::Status s = (*ex)->launch(ir::kTrainGraph);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "@train_step has no inputs handed over: prefetch them before launching it (run "
            "does both)");
  EXPECT_EQ((*ex)->wait().status().message(), "no step in flight to wait for: launch one first");
  EXPECT_EQ((*ex)->prefetch("nope", in).message(), "module @lenet has no graph @nope");

  ASSERT_TRUE((*ex)->prefetch(ir::kTrainGraph, in).ok());
  ASSERT_TRUE((*ex)->launch(ir::kTrainGraph).ok());
  s = (*ex)->launch(ir::kInitGraph);
  EXPECT_EQ(s.message(), "a step of @train_step is in flight: wait for it before launching @init");
  ASSERT_TRUE((*ex)->wait().ok());

  recorder.failCopiesOn("cpu:1/prefetch");
  s = (*ex)->prefetch(ir::kTrainGraph, in);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(),
            "%x.0 (split): copying the next batch's slice in on cpu:1/prefetch: copy engine lost");
  EXPECT_FALSE((*ex)->prefetched(ir::kTrainGraph));
  recorder.failCopiesOn("");
  EXPECT_TRUE((*ex)->run(ir::kTrainGraph, in).ok());
}

// Traced, the copies of the input pipeline are entries of their own (the split's node, on
// the prefetch stream), which the Chrome trace shows on a third thread, "prefetch".
TEST(BackendSeam, PrefetchCopiesAreTracedOnTheirStream) {
  Recorder recorder;
  RecordingBackend backend(recorder, /*records_steps=*/false, /*prefetches=*/true);
  backend::ScopedBackendOverride use(backend);
  auto ex = runtime::Executor::create(lenetOn(2, 0.2), {.trace = true});
  ASSERT_TRUE(ex.ok()) << ex.status();
  ASSERT_TRUE((*ex)->run(ir::kInitGraph, {}).ok());
  (void)(*ex)->takeTrace();
  auto batch = randomBatches(1, 32, 1);
  backend::TensorView in[2] = {{batch[0].images.data(), {ir::DType::kF32, {32, 1, 28, 28}}},
                               {batch[0].labels.data(), {ir::DType::kI32, {32}}}};
  ASSERT_TRUE((*ex)->run(ir::kTrainGraph, in).ok());
  std::vector<runtime::TraceEntry> trace = (*ex)->takeTrace();
  int copies[2] = {0, 0};
  for (const runtime::TraceEntry& e : trace) {
    if (!e.prefetch) continue;
    EXPECT_EQ(e.node->op(), ir::Op::kSplit);
    EXPECT_FALSE(e.comm);
    EXPECT_LE(e.start_ns, e.end_ns);
    ASSERT_LT(e.device, 2u);
    ++copies[e.device];
  }
  EXPECT_EQ(copies[0], 2);
  EXPECT_EQ(copies[1], 2);
  const ir::Module& m = (*ex)->module();
  const std::string json =
      runtime::chromeTrace(m, trace, ir::streamWaits(m, *m.graph(ir::kTrainGraph)));
  EXPECT_TRUE(absl::StrContains(json, R"("args":{"name":"prefetch"})")) << json.substr(0, 2000);
  EXPECT_TRUE(absl::StrContains(json, R"("name":"prefetch: split)")) << json.substr(0, 2000);
}

// ExecutorOptions reach every device (as DeviceOptions, a backend's own options included).
TEST(BackendSeam, ExecutorOptionsReachTheDevices) {
  Recorder recorder;
  RecordingBackend backend(recorder);
  backend::ScopedBackendOverride use(backend);
  auto ex = runtime::Executor::create(lenetOn(2, 0.2),
                                      {.backend_options = {{"conv_algorithm", "direct"}}});
  ASSERT_TRUE(ex.ok()) << ex.status();
  EXPECT_EQ(recorder.counter("createDevice with direct convolutions"), 2);
}

// A setting no backend reads, or one of the wrong type, is refused before any device is
// made, naming the setting.
TEST(BackendSeam, BadBackendSettingsAreNamed) {
  Recorder recorder;
  RecordingBackend backend(recorder);
  backend::ScopedBackendOverride use(backend);
  auto unknown =
      runtime::Executor::create(lenetOn(2, 0.2), {.backend_options = {{"thread_count", 2}}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            "unknown backend setting 'thread_count' (the backends read allow_tf32, "
            "conv_algorithm, threads_per_device)");
  auto ill_typed =
      runtime::Executor::create(lenetOn(2, 0.2), {.backend_options = {{"allow_tf32", "no"}}});
  ASSERT_FALSE(ill_typed.ok());
  EXPECT_EQ(ill_typed.status().message(),
            "backend setting 'allow_tf32' takes true or false, not 'no'");
  EXPECT_EQ(recorder.counter("createDevice with direct convolutions"), 0);
}

// A module whose device kind this build lacks is refused at load, naming the device.
TEST(BackendSeam, AMissingBackendIsNamed) {
  auto m = buildZooModel("lenet", 8);
  ASSERT_TRUE(runPipeline(*m,
                          "autodiff,replicate{devices=[cuda:0]},insert-collectives,dce,schedule,"
                          "assign-streams,plan-events,plan-memory")
                  .ok());
  auto ex = runtime::Executor::create(std::move(m));
  if (backend::backendFor(::tandem::testing::kind("cuda")).ok()) {
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

// The executor plans nothing itself: a plan missing, or made before the last rewrite, is
// an error naming the graph.
TEST(BackendSeam, AMissingOrStalePlanIsAnError) {
  auto m = buildZooModel("lenet", 8);
  ASSERT_TRUE(
      runPipeline(*m, "autodiff,replicate{devices=2},insert-collectives,dce,schedule").ok());
  auto planned = m->clone();
  auto ex = runtime::Executor::create(std::move(m));
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.status().message(),
            "graph @init of module @lenet has no execution plan: run assign-streams, plan-events "
            "and plan-memory as the pipeline's last passes (the executor plans nothing itself)");

  ASSERT_TRUE(runPipeline(*planned, "assign-streams,plan-events,plan-memory").ok());
  // A rewrite that keeps the node list (so the plan stays attached) but changes what runs.
  for (const auto& n : planned->graph(ir::kTrainGraph)->nodes())
    if (n->op() == ir::Op::kSgdUpdate) n->setAttr("lr", 0.5);
  ex = runtime::Executor::create(std::move(planned));
  ASSERT_FALSE(ex.ok());
  EXPECT_THAT(
      std::string(ex.status().message()),
      ::testing::MatchesRegex("the plan of graph @train_step is stale: it was made for "
                              "fingerprint [0-9a-f]{16}, the graph now has [0-9a-f]{16} .*"));
}

}  // namespace
}  // namespace tandem::testing

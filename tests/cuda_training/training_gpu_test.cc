// Whole training steps on the GPU: the compiled module trained on cuda:0 (or on several
// logical devices of it) ends with the parameters the CPU backend or one device gets.
// Without a GPU every test skips, saying what CUDA reported.
//
// Both sides start from the same values (the CPU trainer's @init, written into every GPU
// replica), so a difference is the steps', not the initializers'. f32 with TF32 off
// (the backend setting allow_tf32 = false, `--no-tf32`): cuDNN and cuBLAS then round like
// the CPU's oneDNN up to summation order, so 1e-3 relative holds with a wide margin.

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_options.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"
#include "runtime/data/batch_loader.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/device_kinds.h"
#include "tests/runtime/runtime_test_util.h"

namespace tandem::testing {
namespace {

/// cuda:0, cuda:0.1, ...: `logical` devices on GPU 0.
std::vector<ir::Device> gpus(int logical) {
  std::vector<ir::Device> out;
  for (int s = 0; s < logical; ++s)
    out.push_back({.kind = ::tandem::testing::kind("cuda"), .share = s});
  return out;
}

// Largest |a - b| relative to the largest |b| of the tensor, or to 1e-3 when the tensor
// stays smaller: a convolution's bias before batch norm has a gradient that is zero but
// for rounding, so it stays near zero and is compared in absolute terms.
double difference(const std::vector<float>& a, const std::vector<float>& b) {
  double scale = 1e-3, diff = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    scale = std::max(scale, std::abs(double(b[i])));
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
  }
  return std::isfinite(diff) ? diff / scale : HUGE_VAL;
}

struct Trained {
  std::unique_ptr<runtime::Trainer> trainer;
  std::vector<double> losses;
};

// Compiles `model` for `o`, loads it with the given executor options, initializes it,
// overwrites every replica with `start` (when given), and trains one step per batch.
Trained train(const std::string& model, const TrainSetup& o, const std::vector<OwnedBatch>& batches,
          runtime::ExecutorOptions exec, const Snapshot* start = nullptr) {
  Trained r;
  auto spec = zoo::modelByName(model);
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (!spec.ok()) return r;
  training::CompileOptions c;
  c.build.batch = o.batch;
  c.pipeline = {
      .devices = o.devices,
      .weights = o.weights,
      .optimizer =
          ir::SgdConfig{.lr = o.lr, .momentum = o.momentum, .weight_decay = o.weight_decay},
      .layouts = o.layouts,
      .sync_bn = o.sync_bn};
  auto module = training::compileModel(*spec, c);
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return r;
  exec.seed = o.seed;
  auto t = runtime::Trainer::create(std::move(*module), spec->metrics, exec);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return r;
  absl::Status init = (*t)->initialize();
  EXPECT_TRUE(init.ok()) << init;
  if (!init.ok()) return r;
  if (start) {
    const ir::Module& m = (*t)->executor().module();
    for (const auto& [name, replicas] : *start) {
      const ir::Var* v = m.findVar(name);
      EXPECT_NE(v, nullptr) << name;
      if (!v) return r;
      runtime::HostTensor value(v->type);
      std::copy(replicas[0].begin(), replicas[0].end(),
                reinterpret_cast<float*>(value.buffer.data()));
      for (size_t d = 0; d < m.devices().size(); ++d) {
        absl::Status s = (*t)->executor().writeVariable(name, d, value);
        EXPECT_TRUE(s.ok()) << name << ": " << s;
        if (!s.ok()) return r;
      }
    }
  }
  for (const OwnedBatch& b : batches) {
    auto step = (*t)->trainStep(b.view());
    EXPECT_TRUE(step.ok()) << step.status();
    if (!step.ok()) return r;
    r.losses.push_back(step->loss);
  }
  r.trainer = std::move(*t);
  return r;
}

runtime::ExecutorOptions cpuOptions() { return {}; }
// TF32 off: the comparisons below are between f32 computations.
runtime::ExecutorOptions gpuOptions(bool record_steps = true) {
  runtime::ExecutorOptions e;
  e.backend_options.set("allow_tf32", false);
  e.record_steps = record_steps;
  return e;
}

// The values @init gives on one CPU device, as a snapshot to start other runs from.
Snapshot initialValues(const std::string& model, const TrainSetup& o) {
  TrainSetup one = o;
  one.devices = cpus(1);
  one.weights.clear();
  Trained r = train(model, one, {}, cpuOptions());
  return r.trainer ? snapshot(*r.trainer) : Snapshot{};
}

/// Per variable, the most a comparison may differ by (see roundingSensitivity).
using Tolerances = std::map<std::string, double>;

// Every variable of every replica of `got` within tolerance of replica 0 of `want`
// (parameters, running statistics and momentum buffers alike): `tol`, or the variable's
// own entry of `per_variable` where that is larger; and the parameters moved away from
// `start`.
void expectSameVariables(const Snapshot& got, const Snapshot& want, const Snapshot& start,
                         double tol, const std::string& what,
                         const Tolerances* per_variable = nullptr) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0, worst_limit = tol;
  std::string worst_name;
  size_t moved = 0;
  for (const auto& [name, replicas] : want) {
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << what << ": " << name;
    double limit = tol;
    if (per_variable) limit = std::max(limit, per_variable->at(name));
    for (const auto& replica : it->second) {
      double d = difference(replica, replicas[0]);
      if (d / limit > worst / worst_limit) worst = d, worst_limit = limit, worst_name = name;
    }
    moved += replicas[0] != start.at(name)[0];
  }
  EXPECT_LE(worst, worst_limit) << what << ": worst variable " << worst_name;
  EXPECT_GT(moved, want.size() / 2) << what << ": the steps left most variables untouched";
}

TrainSetup setup(std::vector<ir::Device> devices, int64_t batch) {
  TrainSetup o;
  o.devices = std::move(devices);
  o.batch = batch;
  o.lr = 0.05;
  o.momentum = 0.9;
  o.weight_decay = 1e-4;
  o.seed = 5;
  return o;
}

// `start` moved by one rounding: each value times (1 + 1e-7 u), u uniform in [-1, 1].
Snapshot nudged(const Snapshot& start, uint32_t seed) {
  Snapshot out = start;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  for (auto& [name, replicas] : out)
    for (float& x : replicas[0]) x = static_cast<float>(x * (1 + 1e-7 * u(rng)));
  return out;
}

// How far the CPU's own steps move when the start moves by one rounding (nudged), against
// `start` itself, two steps on cpu:0. A ResNet's gradients have kinks (ReLU, max-pool): one
// rounding anywhere flips some elements across them, and after batch norm over a few
// samples a weight's gradient moves by percents of its largest entry. The first GPU run
// (2026-11-27, H200) saw stage4.block1.conv1.w.momentum differ by 0.199 from the CPU's; the
// CPU against itself so perturbed moves that variable by 0.19, and stage-4 gradients by
// 0.03-0.11 after one step, with random and with Fashion-MNIST images alike. So summation
// order alone (cuDNN against oneDNN, NHWC against NCHW) gives such differences, and a
// variable's tolerance is `margin` times its own sensitivity: a wrong kernel moves every
// variable it feeds by far more, the well-conditioned ones (the stem, the classifier)
// included.
Tolerances roundingSensitivity(const std::string& model, TrainSetup o,
                               const std::vector<OwnedBatch>& batches, const Snapshot& start,
                               const Snapshot& from_start, double margin = 4) {
  o.devices = cpus(1);
  const Snapshot moved_start = nudged(start, 3);
  Trained moved = train(model, o, batches, cpuOptions(), &moved_start);
  Tolerances tol;
  EXPECT_TRUE(moved.trainer);
  if (!moved.trainer) return tol;
  const Snapshot after = snapshot(*moved.trainer);
  for (const auto& [name, replicas] : from_start)
    tol[name] = margin * difference(after.at(name)[0], replicas[0]);
  return tol;
}

// Two steps of `model` at `batch` on cuda:0 against the CPU backend from the same values;
// with `sensitive`, each variable within its rounding sensitivity (roundingSensitivity).
void expectGpuStepsEqualCpu(const std::string& model, int64_t batch, bool sensitive) {
  auto batches = randomBatches(2, batch, 21);
  TrainSetup o = setup(cpus(1), batch);
  Snapshot start = initialValues(model, o);
  ASSERT_FALSE(start.empty());
  Trained cpu = train(model, o, batches, cpuOptions(), &start);
  o.devices = gpus(1);
  Trained gpu = train(model, o, batches, gpuOptions(), &start);
  ASSERT_TRUE(cpu.trainer && gpu.trainer);
  for (size_t i = 0; i < batches.size(); ++i)
    EXPECT_NEAR(gpu.losses[i], cpu.losses[i], 1e-3 * std::abs(cpu.losses[i])) << "step " << i;
  const Snapshot want = snapshot(*cpu.trainer);
  Tolerances tol;
  if (sensitive) tol = roundingSensitivity(model, o, batches, start, want);
  expectSameVariables(snapshot(*gpu.trainer), want, start, 1e-3, model + " on cuda:0 vs cpu:0",
                      sensitive ? &tol : nullptr);
}

// The tolerance above, on the CPU alone (no GPU needed): a second rounding of the start
// (another seed) stays within it, as cuDNN's summation order must; a step that is wrong
// by a little (momentum 0.85 for 0.9) or reads one sample wrong (one label of 32) does not.
TEST(RoundingSensitivity, AcceptsAnotherRoundingAndRefusesAWrongStep) {
  auto batches = randomBatches(2, 16, 21);
  TrainSetup o = setup(cpus(1), 16);
  Snapshot start = initialValues("resnet18", o);
  ASSERT_FALSE(start.empty());
  Trained cpu = train("resnet18", o, batches, cpuOptions(), &start);
  ASSERT_TRUE(cpu.trainer);
  const Snapshot want = snapshot(*cpu.trainer);
  Tolerances tol = roundingSensitivity("resnet18", o, batches, start, want);
  auto failures = [&](const Snapshot& got) {
    ::testing::TestPartResultArray results;
    {
      ::testing::ScopedFakeTestPartResultReporter reporter(
          ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
      expectSameVariables(got, want, start, 1e-3, "probe", &tol);
    }
    return results.size();
  };
  const Snapshot other = nudged(start, 11);
  Trained rounded = train("resnet18", o, batches, cpuOptions(), &other);
  ASSERT_TRUE(rounded.trainer);
  EXPECT_EQ(failures(snapshot(*rounded.trainer)), 0u) << "another rounding of the start";
  TrainSetup wrong = o;
  wrong.momentum = 0.85;
  Trained off = train("resnet18", wrong, batches, cpuOptions(), &start);
  ASSERT_TRUE(off.trainer);
  EXPECT_GT(failures(snapshot(*off.trainer)), 0u) << "momentum 0.85 for 0.9";
  auto relabeled = batches;
  relabeled[0].labels[5] = (relabeled[0].labels[5] + 1) % 10;
  Trained one_label = train("resnet18", o, relabeled, cpuOptions(), &start);
  ASSERT_TRUE(one_label.trainer);
  EXPECT_GT(failures(snapshot(*one_label.trainer)), 0u) << "one of 32 labels changed";
}

TEST(CudaTraining, LenetTwoStepsEqualCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  expectGpuStepsEqualCpu("lenet", 32, /*sensitive=*/false);
}

TEST(CudaTraining, Resnet18TwoStepsEqualCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  expectGpuStepsEqualCpu("resnet18", 16, /*sensitive=*/true);
}

// k logical devices of one GPU at global batch B against one device at B: the split, the
// same-GPU all_reduce and the loss divisor compute the same SGD step; every replica ends
// bit for bit equal to the others (one reduced sum, broadcast).
void expectLogicalDevicesEqualOne(const std::string& model, int logical, int64_t batch,
                                  bool sync_bn) {
  SCOPED_TRACE(model + " on " + std::to_string(logical) + " logical devices, batch " +
               std::to_string(batch));
  auto batches = randomBatches(3, batch, 33);
  TrainSetup o = setup(gpus(1), batch);
  o.sync_bn = sync_bn;
  Snapshot start = initialValues(model, o);
  ASSERT_FALSE(start.empty());
  Trained one = train(model, o, batches, gpuOptions(), &start);
  o.devices = gpus(logical);
  Trained many = train(model, o, batches, gpuOptions(), &start);
  ASSERT_TRUE(one.trainer && many.trainer);
  Snapshot s = snapshot(*many.trainer);
  for (const auto& [name, replicas] : s)
    for (size_t d = 1; d < replicas.size(); ++d)
      EXPECT_TRUE(replicas[d] == replicas[0]) << name << ": replica " << d << " differs from 0";
  expectSameVariables(s, snapshot(*one.trainer), start, 1e-4, "logical devices vs one");
}

TEST(CudaTraining, TwoLogicalDevicesOnOneGpuEqualOneDevice) {
  TANDEM_SKIP_WITHOUT_GPU();
  expectLogicalDevicesEqualOne("lenet", 2, 32, /*sync_bn=*/false);
  // Batch norm over the whole global batch: one all_reduce per layer and direction.
  expectLogicalDevicesEqualOne("lenet_bn", 2, 32, /*sync_bn=*/true);
}

TEST(CudaTraining, UnevenSplitBatch10OnThreeLogicalDevicesEqualsOne) {
  TANDEM_SKIP_WITHOUT_GPU();
  expectLogicalDevicesEqualOne("lenet", 3, 10, /*sync_bn=*/false);  // 4 + 3 + 3
}

// Steps recorded as CUDA graphs after kStepsBeforeRecording plain runs and replayed end
// where plain steps do (cuDNN's backward algorithms may add in another order from run to
// run, so not bit for bit). Two logical devices: the recording forks every device's
// streams from the first's capture and joins them back.
TEST(CudaTraining, RecordedStepsEqualPlainSteps) {
  TANDEM_SKIP_WITHOUT_GPU();
  for (const auto& [model, logical] :
       std::vector<std::pair<std::string, int>>{{"lenet", 2}, {"resnet18", 1}}) {
    SCOPED_TRACE(model);
    auto batches = randomBatches(runtime::kStepsBeforeRecording + 3, 16, 45);
    TrainSetup o = setup(gpus(logical), 16);
    Snapshot start = initialValues(model, o);
    ASSERT_FALSE(start.empty());
    Trained plain = train(model, o, batches, gpuOptions(/*record_steps=*/false), &start);
    Trained recorded = train(model, o, batches, gpuOptions(/*record_steps=*/true), &start);
    ASSERT_TRUE(plain.trainer && recorded.trainer);
    for (size_t i = 0; i < batches.size(); ++i)
      EXPECT_NEAR(recorded.losses[i], plain.losses[i], 1e-4 * std::abs(plain.losses[i]))
          << "step " << i;
    expectSameVariables(snapshot(*recorded.trainer), snapshot(*plain.trainer), start, 1e-4,
                        "recorded vs plain");
  }
}

// The NHWC plan (backend/cuda/layout_plan.h) against --plain-layout: the own kernels add
// in the same order in both layouts, but cuDNN picks other algorithms for NHWC
// convolutions, which add in another order; f32 without TF32, so after two steps the two
// agree to the 1e-3 the comparison with the CPU allows (summation order only).
TEST(CudaTraining, Resnet18NhwcEqualsPlainLayout) {
  TANDEM_SKIP_WITHOUT_GPU();
  auto batches = randomBatches(2, 16, 47);
  TrainSetup o = setup(gpus(1), 16);
  Snapshot start = initialValues("resnet18", o);
  ASSERT_FALSE(start.empty());
  Trained nhwc = train("resnet18", o, batches, gpuOptions(), &start);
  TrainSetup plain_setup = o;
  plain_setup.layouts = false;
  Trained plain = train("resnet18", plain_setup, batches, gpuOptions(), &start);
  ASSERT_TRUE(nhwc.trainer && plain.trainer);
  for (size_t i = 0; i < batches.size(); ++i)
    EXPECT_NEAR(nhwc.losses[i], plain.losses[i], 1e-3 * std::abs(plain.losses[i])) << "step " << i;
  // The two layouts sum in different orders (cuDNN's NHWC and NCHW algorithms).
  const Snapshot want = snapshot(*plain.trainer);
  Trained cpu = train("resnet18", [&] { TrainSetup c = o; c.devices = cpus(1); return c; }(),
                      batches, cpuOptions(), &start);
  ASSERT_TRUE(cpu.trainer);
  Tolerances tol = roundingSensitivity("resnet18", o, batches, start, snapshot(*cpu.trainer));
  expectSameVariables(snapshot(*nhwc.trainer), want, start, 1e-3, "NHWC plan vs --plain-layout",
                      &tol);
}

// `count` distinct 28x28 images with labels 0..9 in turn.
runtime::data::Dataset syntheticData(int64_t count, int salt) {
  runtime::data::Dataset d;
  d.count = d.available = count;
  d.rows = d.cols = 28;
  d.images.resize(static_cast<size_t>(count * 28 * 28));
  for (size_t i = 0; i < d.images.size(); ++i)
    d.images[i] = static_cast<float>((i * 7 + static_cast<size_t>(salt)) % 256) / 255;
  for (int64_t i = 0; i < count; ++i) d.labels.push_back(static_cast<int32_t>((i + salt) % 10));
  return d;
}

struct Passes {
  std::vector<double> losses;
  runtime::PassResult eval;
  Snapshot variables;
};

// Two epochs through the Trainer's pipelined passes (batch k+1 handed over while step k
// runs) from `start`, then an evaluation whose last batch is padded; with
// `evaluate_between`, an evaluation after epoch 1 too (the evaluation graph then runs for
// the first time after the training step was recorded).
Passes trainPipelined(const std::string& model, const TrainSetup& o, runtime::ExecutorOptions exec,
                      const Snapshot& start, bool evaluate_between = false) {
  Passes p;
  Trained t = train(model, o, {}, exec, &start);
  if (!t.trainer) return p;
  const runtime::data::Dataset train_data = syntheticData(7 * o.batch + 3, 1);
  const runtime::data::Dataset test_data = syntheticData(o.batch + o.batch / 2, 2);
  runtime::data::BatchLoader train_loader(train_data, o.batch, true, 9, /*drop_last=*/true);
  runtime::data::BatchLoader test_loader(test_data, o.batch, false, 9, /*drop_last=*/false);
  for (int epoch = 1; epoch <= 2; ++epoch) {
    train_loader.startEpoch(epoch);
    auto r = t.trainer->trainEpoch(train_loader, [&](const runtime::StepReport& s) {
      p.losses.push_back(s.loss);
      return true;
    });
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return p;
    if (evaluate_between && epoch == 1) {
      test_loader.startEpoch(0);
      auto between = t.trainer->evaluate(test_loader);
      EXPECT_TRUE(between.ok()) << between.status();
      if (!between.ok()) return p;
      p.losses.push_back(between->loss);
    }
  }
  test_loader.startEpoch(0);
  auto e = t.trainer->evaluate(test_loader);
  EXPECT_TRUE(e.ok()) << e.status();
  if (e.ok()) p.eval = *e;
  p.variables = snapshot(*t.trainer);
  return p;
}

// The input pipeline on the GPU: 14 steps whose batches were copied in on the prefetch
// streams while the step before ran (each slot's step recorded as a CUDA graph after the
// plain runs, so both recordings replay) end where the same passes with every batch
// copied within its own step do (ExecutorOptions::prefetch_inputs = false). Not bit for
// bit: cuDNN's backward algorithms may add in another order from run to run.
TEST(CudaTraining, PrefetchedBatchesEqualBatchesCopiedInTheirStep) {
  TANDEM_SKIP_WITHOUT_GPU();
  TrainSetup o = setup(gpus(2), 16);
  Snapshot start = initialValues("lenet", o);
  ASSERT_FALSE(start.empty());
  runtime::ExecutorOptions without = gpuOptions();
  without.prefetch_inputs = false;
  Passes plain = trainPipelined("lenet", o, without, start);
  Passes prefetched = trainPipelined("lenet", o, gpuOptions(), start);
  ASSERT_EQ(plain.losses.size(), 14u);
  ASSERT_EQ(prefetched.losses.size(), plain.losses.size());
  for (size_t i = 0; i < plain.losses.size(); ++i)
    EXPECT_NEAR(prefetched.losses[i], plain.losses[i], 1e-4 * std::abs(plain.losses[i]))
        << "step " << i;
  EXPECT_NEAR(prefetched.eval.loss, plain.eval.loss, 1e-4 * std::abs(plain.eval.loss));
  EXPECT_EQ(prefetched.eval.examples, plain.eval.examples);
  expectSameVariables(prefetched.variables, plain.variables, start, 1e-4,
                      "prefetched vs copied in the step");
}

// An evaluation between epochs (issue 26): the evaluation graph runs for the first time
// after the training step was recorded, and epoch 2 replays that recording. When the
// first evaluation could still grow the kernels' workspace (cudaFree of the buffer the
// recording points into), epoch 2 replayed into freed memory. Now every kernel reserves
// its workspace when it is made; the run equals one without recorded steps.
TEST(CudaTraining, EvaluationBetweenEpochsEqualsPlainSteps) {
  TANDEM_SKIP_WITHOUT_GPU();
  for (const auto& [model, logical] :
       std::vector<std::pair<std::string, int>>{{"resnet18", 1}, {"lenet", 2}}) {
    SCOPED_TRACE(model);
    TrainSetup o = setup(gpus(logical), 16);
    Snapshot start = initialValues(model, o);
    ASSERT_FALSE(start.empty());
    Passes plain = trainPipelined(model, o, gpuOptions(/*record_steps=*/false), start,
                                  /*evaluate_between=*/true);
    Passes recorded = trainPipelined(model, o, gpuOptions(/*record_steps=*/true), start,
                                     /*evaluate_between=*/true);
    ASSERT_EQ(plain.losses.size(), 15u);  // 14 steps and the evaluation after epoch 1
    ASSERT_EQ(recorded.losses.size(), plain.losses.size());
    for (size_t i = 0; i < plain.losses.size(); ++i)
      EXPECT_NEAR(recorded.losses[i], plain.losses[i], 1e-4 * std::abs(plain.losses[i]))
          << "loss " << i;
    EXPECT_NEAR(recorded.eval.loss, plain.eval.loss, 1e-4 * std::abs(plain.eval.loss));
    expectSameVariables(recorded.variables, plain.variables, start, 1e-4,
                        "recorded with evaluations between epochs vs plain");
  }
}

// A module with recorded steps comes apart in order (the recordings before the streams
// they used: a use after free at every exit before), and the GPU is fine afterwards: a
// second module on it trains.
TEST(CudaTraining, RecordedStepsTearDownCleanly) {
  TANDEM_SKIP_WITHOUT_GPU();
  auto batches = randomBatches(runtime::kStepsBeforeRecording + 3, 16, 51);
  TrainSetup o = setup(gpus(2), 16);
  Snapshot start = initialValues("lenet", o);
  ASSERT_FALSE(start.empty());
  for (int round = 0; round < 3; ++round) {
    Trained t = train("lenet", o, batches, gpuOptions(), &start);
    ASSERT_TRUE(t.trainer) << "round " << round;
    t.trainer.reset();  // the executor, its recordings, kernels, communicators, devices
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << cudaGetErrorString(cudaGetLastError());
  }
}

// Traced steps take their times from CUDA events read after the step, not from host
// callbacks (two per node, which made every stream wait for a round trip through the
// host): bucket 0's all_reduce on the comm stream starts while device 0's backward still
// runs on the compute stream, as in an untraced step.
TEST(CudaTraining, TracedStepsKeepTheirStreamsOverlapped) {
  TANDEM_SKIP_WITHOUT_GPU();
  TrainSetup o = setup(gpus(2), 256);
  o.bucket_mb = 0.05;  // several buckets for LeNet's 0.5 MB of gradients
  o.first_bucket_mb = 0.01;
  o.trace = true;
  auto t = makeTrainer(*zoo::modelByName("lenet"), o);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE((*t)->initialize().ok());
  auto batches = randomBatches(4, 256, 53);
  for (const OwnedBatch& b : batches) ASSERT_TRUE((*t)->trainStep(b.view()).ok());
  const std::vector<runtime::TraceEntry> trace = (*t)->executor().takeTrace();
  ASSERT_FALSE(trace.empty());
  ASSERT_EQ(trace.size() % batches.size(), 0u);
  const size_t per_step = trace.size() / batches.size();
  int64_t first_reduce_start = -1, last_backward_end = -1;
  for (size_t i = 0; i < trace.size(); ++i) {
    const runtime::TraceEntry& e = trace[i];
    EXPECT_GT(e.end_ns, 0) << e.node->describe();
    EXPECT_GE(e.end_ns, e.start_ns) << e.node->describe();
    if (i < trace.size() - per_step) continue;  // the last step's entries only
    if (e.node->op() == ir::Op::kAllReduce && e.device == 0 && first_reduce_start < 0)
      first_reduce_start = e.start_ns;
    if (e.node->info().has(ir::kBackward) && e.device == 0 && !e.comm)
      last_backward_end = std::max(last_backward_end, e.end_ns);
  }
  ASSERT_GE(first_reduce_start, 0);
  EXPECT_LT(first_reduce_start, last_backward_end)
      << "the first bucket's all_reduce waited for the end of backward";
}

// A label past the last class is refused before the step, naming the sample, on the GPU
// too (the loss kernel made it a NaN loss before; the CPU kernel read past its row).
TEST(CudaTraining, ALabelPastTheLastClassIsNamed) {
  TANDEM_SKIP_WITHOUT_GPU();
  TrainSetup o = setup(gpus(1), 32);
  auto t = makeTrainer(*zoo::modelByName("lenet"), o);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE((*t)->initialize().ok());
  OwnedBatch b = randomBatches(1, 32, 55)[0];
  b.labels[5] = 12;
  auto step = (*t)->trainStep(b.view());
  ASSERT_FALSE(step.ok());
  EXPECT_NE(step.status().message().find("sample 5 of the batch has label 12"), std::string::npos)
      << step.status();
}

// Two GPUs driven by one process: NCCL's guide warns that capturing their collectives
// from one thread may deadlock, so the steps run plainly, after one warning saying so: the
// same steps as with recording off.
TEST(CudaTraining, SeveralGpusInOneProcessRunPlainStepsWithOneWarning) {
  TANDEM_SKIP_WITHOUT_GPU();
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  if (count < 2) GTEST_SKIP() << "needs 2 GPUs: this machine has " << count;
  auto batches = randomBatches(runtime::kStepsBeforeRecording + 3, 16, 57);
  TrainSetup o =
      setup({{::tandem::testing::kind("cuda"), 0}, {::tandem::testing::kind("cuda"), 1}}, 16);
  Snapshot start = initialValues("lenet", o);
  ASSERT_FALSE(start.empty());
  std::vector<std::string> warnings;
  runtime::ExecutorOptions exec = gpuOptions();
  exec.warn = [&](const std::string& line) { warnings.push_back(line); };
  Trained asked = train("lenet", o, batches, exec, &start);
  Trained plain = train("lenet", o, batches, gpuOptions(/*record_steps=*/false), &start);
  ASSERT_TRUE(asked.trainer && plain.trainer);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("NCCL"), std::string::npos) << warnings[0];
  for (size_t i = 0; i < batches.size(); ++i)
    EXPECT_EQ(asked.losses[i], plain.losses[i]) << "step " << i;
}

}  // namespace
}  // namespace tandem::testing


// The input pipeline changes when a batch's bytes move, never what a step computes: the
// Trainer's pipelined passes (batch k+1 handed over while step k runs) equal step-by-step
// runs bit for bit, and CPU devices given a prefetch stream (so that the executor takes
// the path CUDA devices take: slices copied into buffers of the device's own on that
// stream, the split a copy on the device) equal plain CPU devices bit for bit, with real
// worker threads racing where the events did not order them.

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_stream.h"
#include "gtest/gtest.h"
#include "runtime/data/batch_loader.h"
#include "runtime/trainer.h"
#include "tests/device_kinds.h"
#include "tests/runtime/runtime_test_util.h"

namespace tandem::testing {
namespace {

// A CPU device with a prefetch stream of its own (a worker thread); everything else is
// the CPU device's.
class PrefetchingCpuDevice final : public backend::Device {
 public:
  explicit PrefetchingCpuDevice(std::unique_ptr<backend::Device> cpu)
      : cpu_(std::move(cpu)), prefetch_(ir::toString(cpu_->id()) + "/prefetch", 1) {}

  const ir::Device& id() const override { return cpu_->id(); }
  backend::MemoryLocation location() const override { return cpu_->location(); }
  backend::Stream& computeStream() override { return cpu_->computeStream(); }
  backend::Stream& commStream() override { return cpu_->commStream(); }
  backend::Stream* prefetchStream() override { return &prefetch_; }
  absl::StatusOr<backend::DeviceBuffer> allocate(int64_t bytes) override {
    return cpu_->allocate(bytes);
  }
  absl::StatusOr<backend::DeviceBuffer> allocateHost(int64_t bytes) override {
    return cpu_->allocateHost(bytes);
  }
  absl::Status copySliceFromHost(const backend::TensorView& whole, const backend::TensorView& part,
                                 int axis, int64_t offset, backend::Stream& stream) override {
    return cpu_->copySliceFromHost(whole, part, axis, offset, stream);
  }
  absl::Status copyIntoSlice(const backend::TensorView& part, const backend::TensorView& whole,
                             int axis, int64_t offset, backend::Stream& stream) override {
    return cpu_->copyIntoSlice(part, whole, axis, offset, stream);
  }
  absl::Status copyFromHost(const backend::TensorView& src, const backend::TensorView& dst,
                            backend::Stream& stream) override {
    return cpu_->copyFromHost(src, dst, stream);
  }
  absl::Status copyToHost(const backend::TensorView& src, const backend::TensorView& dst,
                          backend::Stream& stream) override {
    return cpu_->copyToHost(src, dst, stream);
  }
  absl::Status prepareGraph(const ir::Graph& g) override { return cpu_->prepareGraph(g); }
  absl::StatusOr<std::unique_ptr<backend::Kernel>> makeKernel(const ir::Node& node) override {
    return cpu_->makeKernel(node);
  }

 private:
  std::unique_ptr<backend::Device> cpu_;
  backend::cpu::CpuStream prefetch_;  // declared last: its worker stops first
};

class PrefetchingCpuBackend final : public backend::Backend {
 public:
  const ir::TargetInfo& target() const override { return cpu().target(); }
  absl::StatusOr<std::unique_ptr<backend::Device>> createDevice(
      const ir::Device& d, const backend::DeviceOptions& o) const override {
    auto device = cpu().createDevice(d, o);
    if (!device.ok()) return device.status();
    return std::make_unique<PrefetchingCpuDevice>(std::move(*device));
  }
  absl::StatusOr<std::unique_ptr<backend::CommunicatorGroup>> createCommunicators(
      absl::Span<backend::Device* const> group) const override {
    return cpu().createCommunicators(group);
  }
  std::string describe() const override { return "CPU devices with prefetch streams"; }
  std::string version() const override { return "prefetching"; }

 private:
  static const backend::Backend& cpu() { return backend::cpu::cpuBackend(); }
};

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

// What a run gives: every step's loss, each pass's figures, and the variables at the end.
struct Figures {
  std::vector<double> losses;
  std::vector<runtime::PassResult> passes;
  Snapshot variables;
};

bool sameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Every replica of every variable the same bytes.
bool sameBits(const Snapshot& a, const Snapshot& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, replicas] : b) {
    auto it = a.find(name);
    if (it == a.end() || it->second.size() != replicas.size()) return false;
    for (size_t d = 0; d < replicas.size(); ++d)
      if (it->second[d].size() != replicas[d].size() ||
          std::memcmp(it->second[d].data(), replicas[d].data(),
                      replicas[d].size() * sizeof(float)) != 0)
        return false;
  }
  return true;
}

void expectSameBits(const Figures& got, const Figures& want) {
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t i = 0; i < want.losses.size(); ++i)
    EXPECT_TRUE(sameBits(got.losses[i], want.losses[i]))
        << "step " << i << ": " << got.losses[i] << " vs " << want.losses[i];
  ASSERT_EQ(got.passes.size(), want.passes.size());
  for (size_t i = 0; i < want.passes.size(); ++i) {
    EXPECT_TRUE(sameBits(got.passes[i].loss, want.passes[i].loss)) << "pass " << i;
    EXPECT_TRUE(sameBits(got.passes[i].accuracy, want.passes[i].accuracy)) << "pass " << i;
    EXPECT_EQ(got.passes[i].examples, want.passes[i].examples) << "pass " << i;
    EXPECT_EQ(got.passes[i].steps, want.passes[i].steps) << "pass " << i;
  }
  EXPECT_TRUE(sameBits(got.variables, want.variables)) << "the variables differ";
}

// Two epochs and an evaluation after each (its last batch padded), then an epoch stopped
// after two steps and one more whole epoch: the pipelined passes of the Trainer.
Figures trainPipelined(runtime::Trainer& t, const runtime::data::Dataset& train,
                       const runtime::data::Dataset& test, int64_t batch) {
  Figures f;
  runtime::data::BatchLoader train_loader(train, batch, true, 3, /*drop_last=*/true);
  runtime::data::BatchLoader test_loader(test, batch, false, 3, /*drop_last=*/false);
  auto record = [&](const runtime::StepReport& s) {
    f.losses.push_back(s.loss);
    return true;
  };
  for (int epoch = 1; epoch <= 2; ++epoch) {
    train_loader.startEpoch(epoch);
    auto r = t.trainEpoch(train_loader, record);
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) f.passes.push_back(*r);
    test_loader.startEpoch(0);
    auto e = t.evaluate(test_loader);
    EXPECT_TRUE(e.ok()) << e.status();
    if (e.ok()) f.passes.push_back(*e);
  }
  train_loader.startEpoch(3);
  auto r = t.trainEpoch(train_loader, [&](const runtime::StepReport& s) {
    f.losses.push_back(s.loss);
    return s.step < 2;
  });
  EXPECT_TRUE(r.ok() && r->stopped);
  train_loader.startEpoch(4);
  r = t.trainEpoch(train_loader, record);
  EXPECT_TRUE(r.ok()) << r.status();
  if (r.ok()) f.passes.push_back(*r);
  f.variables = snapshot(t);
  return f;
}

// The same passes one Executor::run at a time: nothing handed over ahead.
Figures trainStepByStep(runtime::Trainer& t, const runtime::data::Dataset& train,
                        const runtime::data::Dataset& test, int64_t batch) {
  Figures f;
  runtime::data::BatchLoader train_loader(train, batch, true, 3, /*drop_last=*/true);
  runtime::data::BatchLoader test_loader(test, batch, false, 3, /*drop_last=*/false);
  auto epoch = [&](int e, int64_t max_steps) {
    runtime::PassResult r;
    double loss_sum = 0;
    int64_t correct = 0;
    train_loader.startEpoch(e);
    while (auto b = train_loader.next()) {
      auto step = t.trainStep(*b);
      EXPECT_TRUE(step.ok()) << step.status();
      if (!step.ok()) break;
      f.losses.push_back(step->loss);
      loss_sum += step->loss * static_cast<double>(batch);
      correct += static_cast<int64_t>(step->metric_sums[0]);
      r.examples += b->valid;
      if (++r.steps == max_steps) break;
    }
    r.loss = loss_sum / static_cast<double>(r.examples);
    r.accuracy = static_cast<double>(correct) / static_cast<double>(r.examples);
    return r;
  };
  auto evaluate = [&] {
    runtime::PassResult r;
    double loss_sum = 0;
    int64_t correct = 0;
    test_loader.startEpoch(0);
    while (auto b = test_loader.next()) {
      backend::TensorView in[2] = {{const_cast<void*>(b->fields[0]), t.inputTypes()[0]},
                                   {const_cast<void*>(b->fields[1]), t.inputTypes()[1]}};
      auto out = t.executor().run(ir::kEvalGraph, in);
      EXPECT_TRUE(out.ok()) << out.status();
      if (!out.ok()) break;
      loss_sum += (*out)[0].scalar();
      correct += static_cast<int64_t>((*out)[1].scalar());
      r.examples += b->valid;
      ++r.steps;
    }
    r.loss = loss_sum / static_cast<double>(r.examples);
    r.accuracy = static_cast<double>(correct) / static_cast<double>(r.examples);
    return r;
  };
  for (int e = 1; e <= 2; ++e) {
    f.passes.push_back(epoch(e, -1));
    f.passes.push_back(evaluate());
  }
  epoch(3, 2);
  f.passes.push_back(epoch(4, -1));
  f.variables = snapshot(t);
  return f;
}

TrainSetup setup(int devices, int64_t batch) {
  TrainSetup o;
  o.devices = cpus(devices);
  o.batch = batch;
  o.lr = 0.05;
  o.momentum = 0.9;
  o.weight_decay = 1e-4;
  return o;
}

std::unique_ptr<runtime::Trainer> initialized(const TrainSetup& o) {
  auto spec = zoo::modelByName("lenet");
  EXPECT_TRUE(spec.ok());
  if (!spec.ok()) return nullptr;
  auto t = makeTrainer(*spec, o);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return nullptr;
  absl::Status init = (*t)->initialize();
  EXPECT_TRUE(init.ok()) << init;
  return init.ok() ? std::move(*t) : nullptr;
}

// Batch 25 on 3 devices (9 + 8 + 8 rows), 4 training batches an epoch (10 examples
// dropped), 40 test examples (the second batch padded with 10 rows).
TEST(InputPipeline, PipelinedPassesEqualStepByStepRunsBitForBit) {
  const runtime::data::Dataset train = syntheticData(110, 1), test = syntheticData(40, 2);
  const TrainSetup o = setup(3, 25);
  auto pipelined = initialized(o), stepwise = initialized(o);
  ASSERT_TRUE(pipelined && stepwise);
  Figures a = trainPipelined(*pipelined, train, test, o.batch);
  Figures b = trainStepByStep(*stepwise, train, test, o.batch);
  EXPECT_EQ(a.losses.size(), 4u + 4u + 2u + 4u);
  expectSameBits(a, b);
}

// The path of CUDA devices with the CPU's arithmetic: the slices are copied on the
// prefetch streams into the devices' slot buffers while the step before runs, and the
// splits copy them on the devices; the figures are the plain CPU devices' to the bit.
TEST(InputPipeline, DevicesWithPrefetchStreamsEqualPlainDevicesBitForBit) {
  const runtime::data::Dataset train = syntheticData(110, 1), test = syntheticData(40, 2);
  for (int devices : {1, 3}) {
    SCOPED_TRACE(std::to_string(devices) + " devices");
    const TrainSetup o = setup(devices, 25);
    auto plain = initialized(o);
    std::unique_ptr<runtime::Trainer> prefetching;
    {
      PrefetchingCpuBackend backend;
      backend::ScopedBackendOverride use(backend);  // cpu:N devices come from it now
      prefetching = initialized(o);
    }
    ASSERT_TRUE(plain && prefetching);
    Figures a = trainPipelined(*prefetching, train, test, o.batch);
    Figures b = trainPipelined(*plain, train, test, o.batch);
    expectSameBits(a, b);
  }
}

}  // namespace
}  // namespace tandem::testing

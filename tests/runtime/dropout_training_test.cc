// Dropout whose masks do not depend on the split of the batch (issue 24): every mask element
// is a pure function of (seed, @step, mask_id, the sample's row in the global batch, the
// element), so 1, 2 and 3 devices, evenly or unevenly split, draw the same masks.
//
// - Bit for bit: the compiled modules' dropout nodes (forward and gradient), each device's
//   copy run by its CPU kernel on its rows of one whole-batch tensor, give the one-device
//   masks exactly, at several steps (replicate's sample_offset, the kernel and the mask
//   together).
// - Training: the same model trained with the Trainer (which feeds @step) on 1, 2, 3 (3:2:1)
//   and 2 (3:1) devices ends with the one-device parameters and epoch loss, up to the f32
//   reduction order the device count changes (1e-5, as DataParallel.* without dropout),
//   and replicas stay bit-identical. The tolerance is meaningful: the same run fed other
//   step indices (other masks, as a per-device generator would give) ends far outside it.

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "backend/cpu/kernels.h"
#include "gtest/gtest.h"
#include "ir/op_views.h"
#include "runtime/data/batch_loader.h"
#include "tests/runtime/runtime_test_util.h"

namespace tandem::testing {
namespace {

constexpr int64_t kBatch = 96;
constexpr uint64_t kSeed = 7;

/// An MLP with dropout on its input pixels and on its hidden layer.
ModelSpec dropoutMlp() {
  return classifierModel("dropout_mlp", {1, 28, 28}, 10, [](Builder& b, Tensor x) {
    x = b.dropout(b.flatten(x), 0.2);
    x = b.dropout(b.relu(b.linear(x, {.out_features = 32})), 0.5);
    return b.linear(x, {.out_features = 10});
  });
}

TrainSetup setup(int devices, std::vector<double> weights = {}) {
  TrainSetup o;
  o.devices = cpus(devices);
  o.weights = std::move(weights);
  o.batch = kBatch;
  o.lr = 0.1;
  o.momentum = 0.9;
  o.seed = kSeed;
  return o;
}

// 1, 2, 3 (3:2:1: 48 + 32 + 16) and 2 (3:1: 72 + 24) devices.
struct Split {
  const char* name;
  TrainSetup o;
};
std::vector<Split> splits() {
  return {{"2 devices", setup(2)},
          {"3 devices 3:2:1", setup(3, {3, 2, 1})},
          {"2 devices 3:1", setup(2, {3, 1})}};
}

/// The dropout nodes of @train_step by name without the device suffix ("dropout_1.2" ->
/// "dropout_1"), each with its copies in device order.
std::map<std::string, std::vector<const ir::Node*>> dropoutCopies(const ir::Module& m) {
  std::map<std::string, std::vector<const ir::Node*>> out;
  for (const auto& n : m.graph(ir::kTrainGraph)->nodes()) {
    if (!ir::DropoutView::is(*n)) continue;
    const std::string& name = n->result()->name();
    out[m.isReplicated() ? name.substr(0, name.rfind('.')) : name].push_back(n.get());
  }
  return out;
}

/// What the copies of one dropout draw over `x`, the whole batch's tensor (its rows of
/// `per_row` values), at `step`: each copy's CPU kernel on the rows its sample_offset
/// names, put back side by side. Every row must be drawn by exactly one copy.
std::vector<float> drawn(const std::vector<const ir::Node*>& copies, const std::vector<float>& x,
                         int64_t per_row, int32_t step) {
  std::vector<float> out(x.size(), 0.0f);
  std::vector<int> drawn_rows(x.size() / static_cast<size_t>(per_row), 0);
  for (const ir::Node* n : copies) {
    const ir::TensorType& t = n->operand(0)->type();
    EXPECT_EQ(t.numElements() / t.shape[0], per_row) << n->describe();
    const int64_t first = ir::DropoutView(*n).sample_offset(), rows = t.shape[0];
    EXPECT_LE(first + rows, static_cast<int64_t>(drawn_rows.size())) << n->describe();
    if (first + rows > static_cast<int64_t>(drawn_rows.size())) return {};
    for (int64_t r = first; r < first + rows; ++r) ++drawn_rows[static_cast<size_t>(r)];
    backend::cpu::CpuContext ctx(ir::Device{kind("cpu"), 0}, kSeed);
    auto kernel = backend::cpu::makeKernel(*n, ctx);
    EXPECT_TRUE(kernel.ok()) << kernel.status();
    if (!kernel.ok()) return {};
    std::vector<float> in(x.begin() + first * per_row, x.begin() + (first + rows) * per_row);
    std::vector<float> y(in.size());
    int32_t s = step;
    const ir::TensorType step_type{ir::DType::kI32, {1}};
    EXPECT_TRUE((*kernel)->runHere({{in.data(), t}, {&s, step_type}}, {{y.data(), t}}).ok());
    std::copy(y.begin(), y.end(), out.begin() + first * per_row);
  }
  for (size_t r = 0; r < drawn_rows.size(); ++r)
    EXPECT_EQ(drawn_rows[r], 1) << "row " << r << " drawn " << drawn_rows[r] << " times";
  return out;
}

TEST(SplitIndependentDropout, EverySplitDrawsTheOneDeviceMasksBitForBit) {
  auto one = training::compileModel(dropoutMlp(), compileOptions(setup(1)));
  ASSERT_TRUE(one.ok()) << one.status();
  const auto reference = dropoutCopies(**one);
  // Both forward dropouts and the hidden one's gradient (the input's needs none).
  ASSERT_EQ(reference.size(), 3u);
  for (const Split& split : splits()) {
    SCOPED_TRACE(split.name);
    auto m = training::compileModel(dropoutMlp(), compileOptions(split.o));
    ASSERT_TRUE(m.ok()) << m.status();
    const auto copies = dropoutCopies(**m);
    ASSERT_EQ(copies.size(), reference.size());
    for (const auto& [name, ref] : reference) {
      SCOPED_TRACE(name);
      ASSERT_EQ(ref.size(), 1u);
      ASSERT_TRUE(copies.contains(name));
      ASSERT_EQ(copies.at(name).size(), split.o.devices.size());
      const ir::TensorType& whole = ref[0]->operand(0)->type();
      const int64_t per_row = whole.numElements() / whole.shape[0];
      std::vector<float> x(static_cast<size_t>(whole.numElements()));
      for (size_t i = 0; i < x.size(); ++i) x[i] = 1.0f + static_cast<float>(i % 977) / 977;
      for (int32_t step : {0, 1, 2024}) {
        const std::vector<float> want = drawn(ref, x, per_row, step);
        const std::vector<float> got = drawn(copies.at(name), x, per_row, step);
        ASSERT_EQ(got.size(), want.size());
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << "step " << step;
        // And the mask does drop: the comparison is not between copies of x.
        int64_t zeros = 0;
        for (float v : want) zeros += v == 0.0f ? 1 : 0;
        EXPECT_GT(zeros, 0);
        EXPECT_LT(zeros, static_cast<int64_t>(want.size()));
      }
    }
  }
}

/// A data set of kBatch * 4 distinct 28x28 images with labels 0..9 in turn.
runtime::data::Dataset fourBatches() {
  runtime::data::Dataset d;
  d.count = d.available = kBatch * 4;
  d.rows = d.cols = 28;
  d.images.resize(static_cast<size_t>(d.count * 28 * 28));
  for (size_t i = 0; i < d.images.size(); ++i) d.images[i] = static_cast<float>(i * 7 % 256) / 255;
  for (int64_t i = 0; i < d.count; ++i) d.labels.push_back(static_cast<int32_t>(i % 10));
  return d;
}

struct Trained {
  Snapshot params;
  double loss = 0;
};

/// One epoch of four steps by the Trainer, which writes @step (first_step, first_step +
/// 1, ...) before every update.
Trained train(const TrainSetup& o, const runtime::data::Dataset& data, int64_t first_step = 0) {
  auto t = makeTrainer(dropoutMlp(), o);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return {};
  EXPECT_TRUE((*t)->initialize().ok());
  runtime::data::BatchLoader loader(data, kBatch, /*shuffle=*/true, /*seed=*/3,
                                    /*drop_last=*/true);
  loader.startEpoch(1);
  (*t)->setFirstStep(first_step);
  auto r = (*t)->trainEpoch(loader);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  EXPECT_EQ(r->steps, 4);
  return {snapshot(**t), r->loss};
}

TEST(SplitIndependentDropout, TrainingOnAnySplitEndsWhereOneDeviceDoes) {
  const runtime::data::Dataset data = fourBatches();
  const Trained one = train(setup(1), data);
  ASSERT_FALSE(one.params.empty());
  ASSERT_TRUE(one.params.contains(std::string(ir::kStepVar)));
  for (const Split& split : splits()) {
    SCOPED_TRACE(split.name);
    const Trained many = train(split.o, data);
    ASSERT_EQ(many.params.size(), one.params.size());
    EXPECT_NEAR(many.loss, one.loss, 1e-5 * std::abs(one.loss));
    for (const auto& [name, replicas] : many.params) {
      if (name == ir::kStepVar) continue;  // an i32, fed: compared below
      for (size_t d = 0; d < replicas.size(); ++d) {
        EXPECT_LE(relativeDifference(replicas[d], one.params.at(name)[0]), 1e-5) << name;
        EXPECT_EQ(std::memcmp(replicas[d].data(), replicas[0].data(), replicas[0].size() * 4), 0)
            << name << " on device " << d << " differs from device 0";
      }
    }
    // Every device was fed the last update's index.
    for (const auto& replica : many.params.at(std::string(ir::kStepVar))) {
      int32_t last;
      std::memcpy(&last, replica.data(), sizeof last);
      EXPECT_EQ(last, 3);
    }
  }
  // Other masks (the same run fed other step indices) end far outside the tolerance: a
  // split that drew its own masks would fail the comparison above.
  const Trained other = train(setup(1), data, /*first_step=*/1000);
  double largest = 0;
  for (const auto& [name, replicas] : other.params)
    if (name != ir::kStepVar)
      largest = std::max(largest, relativeDifference(replicas[0], one.params.at(name)[0]));
  EXPECT_GT(largest, 1e-3);
}

// A run stopped after two updates and resumed by a fresh trainer (every variable carried
// over, as a checkpoint carries them; the loader skipping the batches done) is fed @step 2
// and 3, so it draws the uninterrupted run's masks: the same parameters and epoch loss,
// bit for bit, on an uneven split.
TEST(SplitIndependentDropout, AResumedEpochDrawsTheUninterruptedRunsMasks) {
  const runtime::data::Dataset data = fourBatches();
  const TrainSetup o = setup(2, {3, 1});
  const Trained straight = train(o, data);
  auto first = makeTrainer(dropoutMlp(), o);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE((*first)->initialize().ok());
  runtime::data::BatchLoader loader(data, kBatch, /*shuffle=*/true, /*seed=*/3,
                                    /*drop_last=*/true);
  loader.startEpoch(1);
  runtime::EpochProgress at;
  auto part = (*first)->trainEpoch(loader, [&](const runtime::StepReport& s) {
    at = {s.step, s.examples, s.correct, s.loss_sum, s.seconds};
    return s.step < 2;
  });
  ASSERT_TRUE(part.ok()) << part.status();
  ASSERT_TRUE(part->stopped);
  ASSERT_EQ(at.steps, 2);

  auto resumed = makeTrainer(dropoutMlp(), o);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_TRUE((*resumed)->initialize().ok());
  const ir::Module& m = (*first)->executor().module();
  for (const ir::Var& v : m.vars())
    for (size_t d = 0; d < m.devices().size(); ++d) {
      auto value = (*first)->executor().readVariable(v.name, d);
      ASSERT_TRUE(value.ok()) << value.status();
      ASSERT_TRUE((*resumed)->executor().writeVariable(v.name, d, *value).ok());
    }
  first->reset();
  loader.startEpoch(1, at.steps);
  auto rest = (*resumed)->trainEpoch(loader, at);
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_EQ(rest->steps, 4);
  EXPECT_EQ(rest->loss, straight.loss);
  for (const auto& [name, replicas] : snapshot(**resumed))
    for (size_t d = 0; d < replicas.size(); ++d)
      EXPECT_EQ(std::memcmp(replicas[d].data(), straight.params.at(name)[d].data(),
                            replicas[d].size() * 4),
                0)
          << name << " on device " << d;
}

}  // namespace
}  // namespace tandem::testing

#pragma once

// Synthetic batches and parameter snapshots for the executor and trainer tests.

#include <array>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backend/conv_algorithm.h"
#include "frontend/zoo/zoo.h"
#include "gtest/gtest.h"
#include "runtime/trainer.h"
#include "tests/device_kinds.h"
#include "tests/test_util.h"
#include "train/compile.h"

namespace tandem::testing {

/// A batch of random images in [0,1) and labels in [0,10) that owns its memory.
struct OwnedBatch {
  std::vector<float> images;
  std::vector<int32_t> labels;
  /// The batch as the trainer takes it: fields x and y, @train_step's inputs.
  runtime::data::Batch view() const {
    fields = {images.data(), labels.data()};
    return {fields, static_cast<int64_t>(labels.size()), 0};
  }
  mutable std::array<const void*, 2> fields{};  // what view() spans
};

inline std::vector<OwnedBatch> randomBatches(int count, int64_t batch, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> pixel(0, 1);
  std::vector<OwnedBatch> out(static_cast<size_t>(count));
  for (OwnedBatch& b : out) {
    b.images.resize(static_cast<size_t>(batch * 28 * 28));
    for (float& p : b.images) p = pixel(rng);
    b.labels.resize(static_cast<size_t>(batch));
    for (int32_t& l : b.labels) l = static_cast<int32_t>(rng() % 10);
  }
  return out;
}

inline std::vector<ir::Device> cpus(int n) {
  std::vector<ir::Device> out;
  for (int i = 0; i < n; ++i) out.push_back({::tandem::testing::kind("cpu"), i});
  return out;
}

/// A training set-up in one struct: what the model compiles to and how it runs.
struct TrainSetup {
  std::vector<ir::Device> devices{{::tandem::testing::kind("cpu"), 0}};
  int64_t batch = 256;
  std::vector<double> weights;  // per-device share of the batch; empty: even
  std::string optimizer = "sgd";  // or adamw
  double lr = 0.1, momentum = 0, weight_decay = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adamw's
  bool lr_schedule = false;  // feed-learning-rate: the updates read @lr_scale
  double clip_grad_norm = 0;  // > 0: clip-grad-norm
  double bucket_mb = 25, first_bucket_mb = 1;
  int64_t allreduce_groups = 1;
  bool alias_views = true;  // false: plan-memory{views=copy}
  bool fuse = true;
  bool recompute = true;
  bool sync_bn = false;
  bool bf16 = false;            // --precision bf16
  bool bf16_allreduce = false;  // --allreduce-dtype bf16
  bool group_updates = false;   // --group-updates on
  backend::ConvAlgorithm conv_algorithm = backend::ConvAlgorithm::kAuto;
  bool layouts = true;  // false: --plain-layout (no assign-layouts)
  uint64_t seed = 0;
  int threads_per_device = 1;
  bool trace = false;
};

/// What the default pipeline compiles for `o`.
inline training::CompileOptions compileOptions(const TrainSetup& o) {
  training::CompileOptions c;
  c.build.batch = o.batch;
  c.pipeline = {.devices = o.devices,
                .weights = o.weights,
                .optimizer = optimizerWith(o.optimizer, {{"lr", o.lr},
                                                         {"momentum", o.momentum},
                                                         {"weight_decay", o.weight_decay},
                                                         {"beta1", o.beta1},
                                                         {"beta2", o.beta2},
                                                         {"eps", o.eps}}),
                .lr_schedule = o.lr_schedule,
                .clip_grad_norm = o.clip_grad_norm,
                .bucket_mb = o.bucket_mb,
                .first_bucket_mb = o.first_bucket_mb,
                .allreduce_groups = o.allreduce_groups,
                .alias_views = o.alias_views,
                .fuse = o.fuse,
                .recompute = o.recompute,
                .layouts = o.layouts,
                .exact_convolutions = o.conv_algorithm == backend::ConvAlgorithm::kDirect,
                .bf16 = o.bf16,
                .bf16_allreduce = o.bf16_allreduce,
                .sync_bn = o.sync_bn,
                .group_updates = o.group_updates};
  return c;
}

/// Compiles `spec` with the default pipeline for `o` and loads it on a Trainer.
inline absl::StatusOr<std::unique_ptr<runtime::Trainer>> makeTrainer(const ModelSpec& spec,
                                                                     const TrainSetup& o) {
  auto module = training::compileModel(spec, compileOptions(o));
  if (!module.ok()) return module.status();
  return runtime::Trainer::create(
      std::move(*module), spec.metrics,
      {.seed = o.seed,
       .backend_options = {{"threads_per_device", o.threads_per_device},
                           {"conv_algorithm", backend::toString(o.conv_algorithm)}},
       .trace = o.trace});
}

/// Every parameter of every device replica: snapshot[var][device] = values.
using Snapshot = std::map<std::string, std::vector<std::vector<float>>>;

inline Snapshot snapshot(runtime::Trainer& t) {
  Snapshot s;
  const ir::Module& m = t.executor().module();
  for (const ir::Var& v : m.vars())
    for (size_t d = 0; d < m.devices().size(); ++d) {
      auto value = t.executor().readVariable(v.name, d);
      EXPECT_TRUE(value.ok()) << value.status();
      if (!value.ok()) continue;
      s[v.name].emplace_back(value->f32(), value->f32() + v.type.numElements());
    }
  return s;
}

/// Largest difference between two tensors relative to the reference tensor's largest
/// magnitude (elementwise relative error is meaningless for entries that are ~0).
inline double relativeDifference(const std::vector<float>& a, const std::vector<float>& ref) {
  double scale = 0, diff = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    scale = std::max(scale, std::abs(double(ref[i])));
    diff = std::max(diff, std::abs(double(a[i]) - double(ref[i])));
  }
  return scale == 0 ? diff : diff / scale;
}

/// Builds, initializes and trains `spec` for the given batches; fails the test on error.
inline std::unique_ptr<runtime::Trainer> trainOn(const ModelSpec& spec, const TrainSetup& o,
                                                 const std::vector<OwnedBatch>& batches) {
  auto t = makeTrainer(spec, o);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return nullptr;
  EXPECT_TRUE((*t)->initialize().ok());
  for (const OwnedBatch& b : batches) {
    auto step = (*t)->trainStep(b.view());
    EXPECT_TRUE(step.ok()) << step.status();
  }
  return std::move(*t);
}

/// The same for the zoo model named `model`.
inline std::unique_ptr<runtime::Trainer> trainOn(const std::string& model, const TrainSetup& o,
                                                 const std::vector<OwnedBatch>& batches) {
  auto spec = zoo::modelByName(model);
  EXPECT_TRUE(spec.ok());
  if (!spec.ok()) return nullptr;
  return trainOn(*spec, o, batches);
}

}  // namespace tandem::testing

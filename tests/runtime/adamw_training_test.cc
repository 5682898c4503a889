// AdamW as training runs it (autodiff's adamw_update per parameter, the gradient
// all_reduce, the step count) against an outside oracle: PyTorch 1.13's torch.optim.AdamW
// training the same MLP from the same weights on the same batches
// (tests/data/gen_adamw_training_ref.py wrote the reference). Its resume from a checkpoint
// is tested with the others' (checkpoint_test.cc, tests/tools/checkpoint_cli_test.cc).

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/lr_schedule.h"
#include "tests/cores/ref_case.h"
#include "tests/runtime/runtime_test_util.h"

namespace tandem::testing {
namespace {

// The reference's model: flatten -> fc1 -> relu -> fc2 (PyTorch's [out, in] weights).
ModelSpec mlp(int64_t hidden) {
  return classifierModel("adamw_mlp", {1, 28, 28}, 10, [hidden](Builder& b, Tensor x) {
    Tensor h = b.relu(b.linear(b.flatten(x), {.out_features = hidden, .name = "fc1"}));
    return b.linear(h, {.out_features = 10, .name = "fc2"});
  });
}

// The generator's integer hashes, computed in double as Python computes them.
std::vector<float> hashed(int layer, int64_t n, double scale) {
  std::vector<float> out;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t h = (static_cast<uint64_t>(i) * 2654435761ull + 97ull * layer) % (1ull << 32);
    out.push_back(static_cast<float>((static_cast<double>(h) / 4294967296.0 - 0.5) * scale));
  }
  return out;
}

OwnedBatch hashedBatch(int64_t batch, int step) {
  OwnedBatch b;
  for (int64_t j = 0; j < batch * 784; ++j)
    b.images.push_back(static_cast<float>(((j * 40503 + 12345 * step) % 65536) / 65536.0));
  for (int64_t k = 0; k < batch; ++k)
    b.labels.push_back(static_cast<int32_t>((7 * k + 3 * step) % 10));
  return b;
}

// || a - b ||_2 / || b ||_2 over the change each made to `start`.
double updateError(const std::vector<float>& got, const RefTensor& want,
                   const std::vector<float>& start) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < start.size(); ++i) {
    const double d_got = double(got[i]) - start[i], d_want = want.values[i] - start[i];
    diff += (d_got - d_want) * (d_got - d_want);
    norm += d_want * d_want;
  }
  return std::sqrt(diff / norm);
}

// Tolerance: Tandem and PyTorch sum the gradients in other orders (oneDNN's GEMM, the
// all_reduce of two devices), a relative 1e-7 or so apart, and AdamW divides by sqrt(v),
// so an element whose gradient is that noise may move the other way. Each parameter's
// whole update (w_after - w_before) must agree to 1e-5 in the L2 norm, which such elements
// barely move (measured: 1.3e-7 to 2.4e-7 on one and two devices), and which beta2 0.999
// in place of 0.99 moves to 2e-3 (tried), as would a wrong bias correction, a missing
// weight decay or a step count off by one. The losses agree to 1e-5.
//
// A case with a schedule (adamw_mlp_training_cosine: PyTorch's SequentialLR of LinearLR and
// CosineAnnealingLR) compiles with feed-learning-rate and writes each update's factor to
// @lr_scale before the step, as Trainer::trainEpoch does.
void expectPyTorchsAdamw(int devices, const std::string& name = "adamw_mlp_training") {
  absl::StatusOr<RefCase> ref = RefCase::load(name);
  ASSERT_TRUE(ref.ok()) << ref.status();
  TrainSetup o;
  o.devices = cpus(devices);
  o.batch = ref->integer("batch");
  o.optimizer = ref->text("optimizer");
  o.lr = ref->num("lr");
  if (o.optimizer == "sgd") {
    o.momentum = ref->num("momentum");
  } else {
    o.beta1 = ref->num("beta1");
    o.beta2 = ref->num("beta2");
    o.eps = ref->num("eps");
    o.weight_decay = ref->num("weight_decay");
  }
  if (ref->hasAttr("clip_grad_norm")) o.clip_grad_norm = ref->num("clip_grad_norm");
  std::optional<runtime::LrSchedule> schedule;
  if (ref->hasAttr("schedule")) {
    auto parsed = runtime::LrSchedule::parse(ref->text("schedule"), ref->integer("warmup"),
                                             ref->integer("steps"), 1);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    schedule = *parsed;
    o.lr_schedule = true;
  }
  auto t = makeTrainer(mlp(ref->integer("hidden")), o);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE((*t)->initialize().ok());

  const std::vector<std::pair<std::string, double>> params = {
      {"fc1.w", 0.0625}, {"fc1.b", 0.125}, {"fc2.w", 0.25}, {"fc2.b", 0.125}};
  std::map<std::string, std::vector<float>> start;
  for (size_t l = 0; l < params.size(); ++l) {
    const auto& [name, scale] = params[l];
    const ir::Var* var = (*t)->executor().module().findVar(name);
    ASSERT_NE(var, nullptr) << name;
    runtime::HostTensor value(var->type);
    start[name] = hashed(static_cast<int>(l), var->type.numElements(), scale);
    std::memcpy(value.buffer.data(), start[name].data(), var->type.bytes());
    for (int d = 0; d < devices; ++d)
      ASSERT_TRUE((*t)->executor().writeVariable(name, static_cast<size_t>(d), value).ok());
  }
  const RefTensor& losses = ref->tensor("losses");
  for (int step = 0; step < ref->integer("steps"); ++step) {
    OwnedBatch b = hashedBatch(o.batch, step);
    if (schedule) {
      runtime::HostTensor factor(ir::TensorType{ir::DType::kF32, {1}});
      const float f = static_cast<float>(schedule->factor(step));
      std::memcpy(factor.buffer.data(), &f, sizeof f);
      for (int d = 0; d < devices; ++d)
        ASSERT_TRUE((*t)->executor()
                        .writeVariable(std::string(ir::kLrScaleVar), static_cast<size_t>(d), factor)
                        .ok());
    }
    auto r = (*t)->trainStep(b.view());
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_NEAR(r->loss, losses.values[size_t(step)], 1e-5 * losses.values[size_t(step)])
        << "step " << step;
  }
  for (const auto& [name, scale] : params)
    for (int d = 0; d < devices; ++d) {
      auto value = (*t)->executor().readVariable(name, static_cast<size_t>(d));
      ASSERT_TRUE(value.ok()) << value.status();
      const std::vector<float> got(value->f32(), value->f32() + value->type.numElements());
      EXPECT_LE(updateError(got, ref->tensor(name), start[name]), 1e-5)
          << name << " on device " << d;
      if (o.optimizer != "adamw") continue;
      // Every parameter's update count is the steps taken.
      auto count = (*t)->executor().readVariable(name + ".step", static_cast<size_t>(d));
      ASSERT_TRUE(count.ok()) << count.status();
      EXPECT_EQ(count->f32()[0], float(ref->integer("steps"))) << name;
    }
}

TEST(AdamwTraining, MatchesPyTorchsAdamwOnOneDevice) { expectPyTorchsAdamw(1); }

// Two devices: each takes half the batch, the gradients are all-reduced before the update.
TEST(AdamwTraining, MatchesPyTorchsAdamwOnTwoDevices) { expectPyTorchsAdamw(2); }

// Warmup then cosine: the factor each update reads from @lr_scale scales the lr in the
// decoupled decay and the step, as PyTorch's scheduler sets the group's lr.
TEST(AdamwTraining, MatchesPyTorchsAdamwUnderWarmupAndCosine) {
  expectPyTorchsAdamw(2, "adamw_mlp_training_cosine");
}

// Gradient clipping by global norm (PyTorch's torch.nn.utils.clip_grad_norm_ at 0.5; the
// gradients' norms are 1.6 to 4.1, so every step clips): with SGD and momentum the clipped
// gradient is the update, so a wrong factor moves every parameter by as much; with AdamW
// the factor reaches the update through the moments. On two devices each clips the
// all-reduced sums by the same factor.
TEST(GradientClipping, MatchesPyTorchsClipGradNormWithSgdMomentum) {
  expectPyTorchsAdamw(1, "sgd_mlp_training_clip");
  expectPyTorchsAdamw(2, "sgd_mlp_training_clip");
}

TEST(GradientClipping, MatchesPyTorchsClipGradNormWithAdamw) {
  expectPyTorchsAdamw(2, "adamw_mlp_training_clip");
}

}  // namespace
}  // namespace tandem::testing

// A token model with a ViT's embedding and head (patch tokens through a shared weight, a
// class token prepended by concat_axis, a position embedding added by add_bcast, a
// per-channel gain by mul_bcast, scale, the class token taken back out by slice_axis
// beside the tokens' mean) trains data-parallel like any other: 1 device, 2 devices and
// the uneven split 3:1 end with the same parameters. Each device's share re-infers the
// ops' shapes, its gradients of the class token and the position embedding are sums over
// its share, and the all_reduce adds them to the one-device step's.

#include <cmath>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "tests/runtime/runtime_test_util.h"

namespace tandem::testing {
namespace {

ModelSpec tokenModel() {
  return classifierModel("tokens", {1, 28, 28}, 10, [](Builder& b, Tensor x) {
    const ir::Initializer normal{ir::Initializer::Kind::kNormal, 0.1};
    const ir::Initializer ones{ir::Initializer::Kind::kOnes};
    // 49 tokens of 16 pixels each (rows of the image cut in pieces), width 8.
    Tensor pixels = b.reshape(x, {-1, 49, 16});
    Tensor embed = b.variable("embed", {ir::DType::kF32, {16, 8}}, ir::VarRole::kParam, normal);
    Tensor tokens = b.matmul(pixels, embed);
    Tensor cls = b.variable("cls", {ir::DType::kF32, {1, 1, 8}}, ir::VarRole::kParam, normal);
    Tensor pos = b.variable("pos", {ir::DType::kF32, {1, 50, 8}}, ir::VarRole::kParam, normal);
    Tensor gain = b.variable("gain", {ir::DType::kF32, {8}}, ir::VarRole::kParam, ones);
    Tensor t = b.addBroadcast(b.concat({cls, tokens}, 1), pos);
    t = b.scale(b.mulBroadcast(t, gain), 0.5);
    Tensor head = b.reshape(b.slice(t, 1, 0, 1), {-1, 8});
    return b.linear(b.add(head, b.mean(t, 1)), {.out_features = 10});
  });
}

TrainSetup options(int devices, std::vector<double> weights = {}) {
  TrainSetup o;
  o.devices = cpus(devices);
  o.weights = std::move(weights);
  o.batch = 48;
  o.lr = 0.1;
  o.momentum = 0.9;
  o.seed = 11;
  return o;
}

// 1e-5 of each tensor's scale, as DataParallel.OneTwoAndThreeDevicesEndWithTheSameParameters:
// the shares add their gradients in another order than one device does.
TEST(AxisOpsTraining, OneTwoAndUnevenDevicesEndWithTheSameParameters) {
  auto batches = randomBatches(4, 48, 3);
  auto one = trainOn(tokenModel(), options(1), batches);
  auto two = trainOn(tokenModel(), options(2), batches);
  auto uneven = trainOn(tokenModel(), options(2, {3, 1}), batches);  // 36 + 12
  ASSERT_TRUE(one && two && uneven);
  Snapshot ref = snapshot(*one), s2 = snapshot(*two), s31 = snapshot(*uneven);
  for (const char* name : {"cls", "pos", "gain", "embed"}) {
    ASSERT_TRUE(ref.count(name)) << name;
    const std::vector<float>& want = ref[name][0];
    for (const Snapshot* s : {&s2, &s31})
      for (const auto& replica : s->at(name))
        EXPECT_LE(relativeDifference(replica, want), 1e-5) << name;
  }
  // They moved: the class token and the position embedding got gradients.
  auto fresh = makeTrainer(tokenModel(), options(1));
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  ASSERT_TRUE((*fresh)->initialize().ok());
  Snapshot start = snapshot(**fresh);
  for (const char* name : {"cls", "pos", "gain"})
    EXPECT_GT(relativeDifference(ref[name][0], start[name][0]), 1e-3) << name;
}

// Under --precision bf16 the tokens flow in bf16 beside f32 master weights (the class
// token, the position embedding, the gain: read as they are), the gradients reach them
// cast to f32, on 2 devices as on 1. bf16 activations round each value to 2^-9 of itself,
// so the parameters after 4 steps stay within 1e-2 of the f32 run's scale.
TEST(AxisOpsTraining, Bf16TrainsNearF32OnTwoDevices) {
  auto batches = randomBatches(4, 48, 4);
  TrainSetup low = options(2);
  low.bf16 = true;
  auto f32 = trainOn(tokenModel(), options(1), batches);
  auto bf16 = trainOn(tokenModel(), low, batches);
  ASSERT_TRUE(f32 && bf16);
  // The tokens are bf16 indeed: the f32 class token joins bf16 patch tokens.
  bool bf16_tokens = false;
  for (const auto& n : bf16->executor().module().graph(ir::kTrainGraph)->nodes())
    bf16_tokens = bf16_tokens || (n->op() == ir::Op::kConcatAxis &&
                                  n->operand(0)->type().dtype == ir::DType::kF32 &&
                                  n->result()->type().dtype == ir::DType::kBF16);
  EXPECT_TRUE(bf16_tokens);
  Snapshot want = snapshot(*f32), got = snapshot(*bf16);
  EXPECT_GT(relativeDifference(got.at("pos")[0], want.at("pos")[0]), 0);  // not the f32 run
  for (const char* name : {"cls", "pos", "gain", "embed"})
    for (const auto& replica : got.at(name)) {
      for (float v : replica) ASSERT_TRUE(std::isfinite(v)) << name;
      EXPECT_LE(relativeDifference(replica, want.at(name)[0]), 1e-2) << name;
    }
}

}  // namespace
}  // namespace tandem::testing

// fuse-conv-bn-relu changes how the step computes, not what: fused and unfused training
// end with the same parameters and running statistics, and the fused step keeps fewer
// activations alive.

#include <algorithm>
#include <cmath>
#include <string>

#include "backend/cpu/avx512_rows.h"
#include "backend/cpu/cpu_info.h"
#include "backend/cpu/layout_plan.h"
#include "gtest/gtest.h"
#include "ir/op_views.h"
#include "ir/plan.h"
#include "tests/runtime/runtime_test_util.h"

namespace tandem::testing {
namespace {

// Largest |a - b| relative to the largest |b| of the tensor, or to 1e-3 when the tensor
// stays smaller: a convolution's bias before batch norm has a gradient that is zero but
// for rounding, so it stays near zero and is compared in absolute terms.
double relativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double scale = 1e-3, diff = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    scale = std::max(scale, std::abs(double(b[i])));
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
  }
  return diff / scale;
}

void expectFusedEqualsUnfused(const std::string& model, int steps, int devices) {
  TrainSetup o;
  o.devices = cpus(devices);
  o.batch = 8;
  o.lr = 0.01;
  o.momentum = 0.9;
  o.seed = 3;
  auto batches = randomBatches(steps, 8, 11);
  auto fused = trainOn(model, o, batches);
  o.fuse = false;
  auto unfused = trainOn(model, o, batches);
  ASSERT_TRUE(fused && unfused);
  Snapshot f = snapshot(*fused), u = snapshot(*unfused);
  const ir::Module& m = unfused->executor().module();
  double worst = 0;
  std::string worst_name;
  for (const auto& [name, replicas] : u) {
    // Parameters and running statistics. Not the momentum buffers: a convolution's bias
    // before batch norm has a gradient that is zero but for rounding, so its momentum is
    // rounding noise, while the bias itself barely moves.
    if (m.findVar(name)->role == ir::VarRole::kOptimizer) continue;
    for (size_t d = 0; d < replicas.size(); ++d) {
      double diff = relativeDifference(f[name][d], replicas[d]);
      if (diff > worst) worst = diff, worst_name = name;
    }
  }
  EXPECT_LE(worst, 1e-5) << "worst: " << worst_name << " " << worst;
}

// batch_norm_recompute shares batch_norm_apply's loop and reads the same statistics: with
// and without recompute-bn-relu, training ends with the same parameters, bit for bit.
// Trains `model` 3 steps on 2 devices with a setting on (as given) and off (`off` flips
// it); returns both trainers, or null ones after a failed assertion.
template <typename Off>
std::pair<std::unique_ptr<runtime::Trainer>, std::unique_ptr<runtime::Trainer>> trainBothWays(
    const std::string& model, bool sync_bn, Off off) {
  TrainSetup o;
  o.devices = cpus(2);
  o.batch = 8;
  o.lr = 0.01;
  o.momentum = 0.9;
  o.sync_bn = sync_bn;
  auto batches = randomBatches(3, 8, 5);
  auto on = trainOn(model, o, batches);
  off(o);
  auto other = trainOn(model, o, batches);
  return {std::move(on), std::move(other)};
}

TEST(Fusion, RecomputeChangesNoBit) {
  for (const std::string model : {"resnet18", "lenet_bn"}) {
    auto [with, without] = trainBothWays(model, model == "lenet_bn",
                                         [](TrainSetup& o) { o.recompute = false; });
    ASSERT_TRUE(with && without) << model;
    size_t recomputes = 0;
    for (const auto& n : with->executor().module().graph(ir::kTrainGraph)->nodes())
      recomputes += n->op() == ir::Op::kBatchNormRecompute;
    EXPECT_EQ(recomputes, model == "resnet18" ? 18u : 4u) << model;  // per device: 9, 2
    EXPECT_TRUE(snapshot(*with) == snapshot(*without)) << model;
  }
}

// LeNet's relu -> avg_pool2d, fused (fuse-relu-pool: relu on load, the gradient masked in
// the pool's backward), its first convolution with that pool (fuse-conv-relu-pool: image
// by image by kTaps' loops, relu's mask kept for the filter gradient) and
// not: the same loops and per-element math either way, so the three steps end bit for bit
// the same. Where kTaps' loops do not run (no AVX-512) the fused pair's direct loops
// round otherwise: the same to rounding there.
TEST(Fusion, ReluPoolChangesNoBit) {
  auto [fused, unfused] =
      trainBothWays("lenet", /*sync_bn=*/false, [](TrainSetup& o) { o.fuse = false; });
  ASSERT_TRUE(fused && unfused);
  size_t fused_pools = 0, conv_pools = 0, conv_pool_filters = 0, relus = 0;
  for (const auto& n : fused->executor().module().graph(ir::kTrainGraph)->nodes()) {
    fused_pools += n->op() == ir::Op::kAvgPool2d && ir::attr::relu(*n);
    conv_pools += n->op() == ir::Op::kConv2dReluAvgPool;
    conv_pool_filters += n->op() == ir::Op::kConv2dReluAvgPoolBackwardFilter;
    relus += n->op() == ir::Op::kRelu;
  }
  EXPECT_EQ(fused_pools, 2u);        // pool2's, per device
  EXPECT_EQ(conv_pools, 2u);         // conv1 + pool1, per device
  EXPECT_EQ(conv_pool_filters, 2u);  // and its filter gradient
  EXPECT_EQ(relus, 2u);              // fc1's, per device
  if (backend::cpu::avx512Runs()) {
    EXPECT_TRUE(snapshot(*fused) == snapshot(*unfused));
  } else {
    Snapshot f = snapshot(*fused), u = snapshot(*unfused);
    for (const auto& [name, replicas] : u)
      for (size_t d = 0; d < replicas.size(); ++d)
        EXPECT_LE(relativeDifference(f[name][d], replicas[d]), 1e-5) << name;
  }
}

// plan-memory gives every reshape (the ViT: two per linear, and the head split and merge)
// and flatten its operand's bytes, so its copy does nothing: the same bits as copying.
TEST(Fusion, ViewsSharingTheirOperandsBytesChangeNoBit) {
  for (const std::string model : {"vit", "lenet"}) {
    auto [shared, copied] =
        trainBothWays(model, /*sync_bn=*/false, [](TrainSetup& o) { o.alias_views = false; });
    ASSERT_TRUE(shared && copied) << model;
    const ir::Graph& g = *shared->executor().module().graph(ir::kTrainGraph);
    size_t views = 0, sharing = 0;  // views of arena values (not of a variable's storage)
    for (const auto& n : g.nodes()) {
      if (!ir::isView(n->op()) || ir::isSource(n->operand(0)->def()->op())) continue;
      ++views;
      sharing += g.plan()->offset(*n->result(0)) == g.plan()->offset(*n->operand(0));
    }
    EXPECT_GT(views, 0u) << model;
    EXPECT_EQ(sharing, views) << model;
    const ir::Graph& c = *copied->executor().module().graph(ir::kTrainGraph);
    for (const auto& n : c.nodes()) {
      if (!ir::isView(n->op()) || ir::isSource(n->operand(0)->def()->op())) continue;
      EXPECT_NE(c.plan()->offset(*n->result(0)), c.plan()->offset(*n->operand(0)))
          << model << ": " << n->describe();
    }
    EXPECT_TRUE(snapshot(*shared) == snapshot(*copied)) << model;
  }
}

// A CPU device with AVX-512 keeps the activations between convolutions and fused batch
// norm in nChw16c (backend/cpu/layout_plan.h); its loops add in the plain loops' order,
// so training with and without it ends bit for bit the same.
TEST(Fusion, BlockedActivationsChangeNoBit) {
  if (backend::cpu::hostCpuInfo().isa.find("avx512") == std::string::npos)
    GTEST_SKIP() << "this CPU has no AVX-512 (" << backend::cpu::hostCpuInfo().isa
                 << "): its devices keep every tensor plain";
  auto [blocked, plain] =
      trainBothWays("resnet18", /*sync_bn=*/true, [](TrainSetup& o) { o.layouts = false; });
  ASSERT_TRUE(blocked && plain);
  // Most of the step's activations are blocked (all but the last stage's residual
  // stream, which global_avg_pool reads).
  const ir::Graph& g = *blocked->executor().module().graph(ir::kTrainGraph);
  EXPECT_GT(backend::cpu::channelBlockedValues(g).size(), 150u);
  EXPECT_TRUE(snapshot(*blocked) == snapshot(*plain));
}

// One step's forward output (the loss) and every parameter's gradient, fused against
// unfused on the same random batch. The gradient is read off the update: with lr 1000 and
// no momentum, w - w' = 1000 g, which the float subtraction keeps to about 1e-7 of g.
TEST(Fusion, FirstStepLossAndEveryGradientEqualUnfused) {
  for (const std::string model : {"resnet18", "lenet_bn"}) {
    SCOPED_TRACE(model);
    const double lr = 1000;
    auto batches = randomBatches(1, 8, 17);
    struct Run {
      double loss = 0;
      Snapshot grads;
    };
    auto run = [&](bool fuse) -> Run {
      TrainSetup o;
      o.batch = 8;
      o.lr = lr;
      o.fuse = fuse;
      auto t = makeTrainer(*zoo::modelByName(model), o);
      EXPECT_TRUE(t.ok()) << t.status();
      if (!t.ok()) return {};
      EXPECT_TRUE((*t)->initialize().ok());
      Snapshot before = snapshot(**t);
      auto step = (*t)->trainStep(batches[0].view());
      EXPECT_TRUE(step.ok()) << step.status();
      Snapshot after = snapshot(**t);
      Run r{step.ok() ? step->loss : 0, {}};
      const ir::Module& m = (*t)->executor().module();
      for (auto& [name, replicas] : before) {
        if (m.findVar(name)->role != ir::VarRole::kParam) continue;
        std::vector<float> g(replicas[0].size());
        for (size_t i = 0; i < g.size(); ++i)
          g[i] = static_cast<float>((double(replicas[0][i]) - after[name][0][i]) / lr);
        r.grads[name] = {std::move(g)};
      }
      return r;
    };
    Run fused = run(true), unfused = run(false);
    EXPECT_NEAR(fused.loss, unfused.loss, 1e-5 * std::abs(unfused.loss));
    ASSERT_EQ(fused.grads.size(), unfused.grads.size());
    ASSERT_FALSE(unfused.grads.empty());
    for (const auto& [name, g] : unfused.grads)
      EXPECT_LE(relativeDifference(fused.grads[name][0], g[0]), 1e-5) << name;
  }
}

TEST(Fusion, ResNet18FusedEqualsUnfusedAfterFiveSteps) {
  expectFusedEqualsUnfused("resnet18", 5, 1);
}

TEST(Fusion, BatchNormLenetOnTwoDevicesFusedEqualsUnfused) {
  expectFusedEqualsUnfused("lenet_bn", 5, 2);
}

// eval_step folds the running statistics into the convolutions: the same loss and
// correct count as the unfused batch norm in inference mode, after some training moved
// the running statistics away from their initial values.
TEST(Fusion, FoldedEvaluationEqualsUnfused) {
  TrainSetup o;
  o.batch = 8;
  o.lr = 0.01;
  o.seed = 4;
  auto batches = randomBatches(3, 8, 12);
  auto fused = trainOn("resnet18", o, batches);
  o.fuse = false;
  auto unfused = trainOn("resnet18", o, batches);
  ASSERT_TRUE(fused && unfused);
  auto eval = randomBatches(1, 8, 13);
  const runtime::data::Batch b = eval[0].view();
  backend::TensorView in[2] = {{const_cast<void*>(b.fields[0]), fused->inputTypes()[0]},
                               {const_cast<void*>(b.fields[1]), fused->inputTypes()[1]}};
  auto f = fused->executor().run(ir::kEvalGraph, in);
  auto u = unfused->executor().run(ir::kEvalGraph, in);
  ASSERT_TRUE(f.ok() && u.ok());
  const double loss_f = (*f)[0].scalar(), loss_u = (*u)[0].scalar();
  EXPECT_NEAR(loss_f, loss_u, 1e-5 * std::abs(loss_u));
  EXPECT_EQ((*f)[1].scalar(), (*u)[1].scalar());
}

// Like relativeDifference, but per-channel tensors (biases, batch norm's gamma and beta,
// running statistics) count in the units of the activations, where gamma starts at 1:
// their gradients are sums over the whole batch that nearly cancel (beta's, under batch
// norm), so the 1e-7 by which a convolution over 32 images differs from one over 64
// comes back as 1e-6 of a beta that is itself 1e-3.
double unitDifference(const std::vector<float>& a, const std::vector<float>& b,
                      const ir::Module& m, const std::string& name) {
  double scale = m.findVar(name)->type.rank() == 1 ? 1.0 : 0.0, diff = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    scale = std::max(scale, std::abs(double(b[i])));
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
  }
  return scale == 0 ? diff : diff / scale;
}

// Sync batch norm: 2 devices normalizing with the statistics of the whole global batch
// train as one device with that batch; without it each device's batch norm sees only its
// half, and the runs part ways (which is why sync batch norm exists).
TEST(SyncBatchNorm, TwoDevicesEqualOneDevice) {
  TrainSetup o;
  o.batch = 64;
  o.lr = 0.01;
  o.momentum = 0.9;
  o.seed = 5;
  // Direct convolutions: Winograd's rounding depends on how the batch is cut (3e-4 after
  // these 3 steps), and what is tested here is batch norm's synchronization.
  o.conv_algorithm = backend::ConvAlgorithm::kDirect;
  auto batches = randomBatches(3, 64, 14);
  auto one = trainOn("resnet18", o, batches);
  o.devices = cpus(2);
  o.sync_bn = true;
  auto synced = trainOn("resnet18", o, batches);
  o.sync_bn = false;
  auto local = trainOn("resnet18", o, batches);
  ASSERT_TRUE(one && synced && local);
  Snapshot s1 = snapshot(*one), ss = snapshot(*synced), sl = snapshot(*local);
  const ir::Module& m = one->executor().module();
  double worst_synced = 0, worst_local = 0;
  for (const auto& [name, replicas] : s1) {
    if (m.findVar(name)->role == ir::VarRole::kOptimizer) continue;
    for (size_t d = 0; d < 2; ++d) {
      worst_synced = std::max(worst_synced, unitDifference(ss[name][d], replicas[0], m, name));
      worst_local = std::max(worst_local, unitDifference(sl[name][d], replicas[0], m, name));
    }
    // Running statistics are the same on both devices, bit for bit.
    EXPECT_EQ(ss[name][0], ss[name][1]) << name;
  }
  RecordProperty("synced", std::to_string(worst_synced));
  RecordProperty("local", std::to_string(worst_local));
  EXPECT_LE(worst_synced, 1e-4);
  EXPECT_GT(worst_local, 1e-3);  // local batch statistics: visibly different training
}

// Unfused, backward keeps each convolution's output (for batch norm) and relu's output
// (for the next convolution's filter gradient and relu's mask). Fused, recompute-bn-relu
// recomputes the non-residual relu outputs in backward from the first, so they die in
// forward: the peak drops by about one activation per such layer (measured at N=32:
// 116,414,656 vs 142,084,800 bytes, 0.82x).
TEST(Fusion, FusedStepNeedsLessActivationMemory) {
  TrainSetup o;
  o.batch = 32;
  auto fused = makeTrainer(*zoo::modelByName("resnet18"), o);
  o.fuse = false;
  auto unfused = makeTrainer(*zoo::modelByName("resnet18"), o);
  ASSERT_TRUE(fused.ok() && unfused.ok());
  const ir::GraphPlan* pf = (*fused)->executor().module().graph(ir::kTrainGraph)->plan();
  const ir::GraphPlan* pu = (*unfused)->executor().module().graph(ir::kTrainGraph)->plan();
  ASSERT_TRUE(pf && pu);
  EXPECT_LT(pf->arenas[0].live_peak_bytes, pu->arenas[0].live_peak_bytes * 0.85);
  RecordProperty("fused_peak_bytes", std::to_string(pf->arenas[0].live_peak_bytes));
  RecordProperty("unfused_peak_bytes", std::to_string(pu->arenas[0].live_peak_bytes));
}

}  // namespace
}  // namespace tandem::testing

// fuse-conv-bn-relu changes how the step computes, not what: fused and unfused training
// end with the same parameters and running statistics, and the fused step keeps fewer
// activations alive.

#include <algorithm>
#include <cmath>
#include <string>

#include "gtest/gtest.h"
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
  EXPECT_LE(worst, 1e-5) << "worst: " << worst_name;
}

TEST(Fusion, ResNet18FusedEqualsUnfusedAfterFiveSteps) {
  expectFusedEqualsUnfused("resnet18", 5, 1);
}

}  // namespace
}  // namespace tandem::testing

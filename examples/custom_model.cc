// custom_model: define a network of your own with the Tandem DSL, compile it for two
// devices and look at the data-parallel training step the compiler made of it.
//
//   build/examples/custom_model > train_step.tir
//
// prints the parallel train_step graph as text IR, then a one-line summary. The four
// steps below are all a user writes: layers as plain C++ functions, a ModelSpec,
// buildModule, and the default pass pipeline.

#include <iostream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backend/targets.h"
#include "frontend/model.h"
#include "ir/printer.h"
#include "ir/target.h"
#include "passes/pass_manager.h"
#include "passes/pipeline.h"

namespace {

using tandem::Builder;
using tandem::Tensor;

// 1. Blocks are ordinary functions. A scope names every parameter made inside it, so
//    this block's first weight is "block1.conv1.w" and its statistics
//    "block1.bn1.running_mean"; layers left unnamed get "conv", "conv_1", ...
Tensor vggBlock(Builder& b, Tensor x, const std::string& name, int64_t channels) {
  auto scope = b.scope(name);  // ends when `scope` goes out of scope
  for (int i = 1; i <= 2; ++i) {
    // Options are named fields; batch norm follows, so the conv needs no bias.
    x = b.conv2d(x, {.out_channels = channels,
                     .kernel = 3,
                     .pad = 1,
                     .bias = false,
                     .name = absl::StrCat("conv", i)});
    x = b.relu(b.batchNorm(x, {.name = absl::StrCat("bn", i)}));
  }
  return b.maxPool2d(x, {.kernel = 2, .name = "pool"});  // halves height and width
}

// 2. The network: [N,1,28,28] -> 32 channels at 14x14 -> 64 at 7x7 -> 10 class scores.
//    Shapes are checked as each layer is added; a mistake is reported by buildModule
//    with the layer's scope path and this file's line.
Tensor tinyVgg(Builder& b, Tensor images) {
  Tensor x = vggBlock(b, images, "block1", 32);
  x = vggBlock(b, x, "block2", 64);
  auto head = b.scope("head");
  return b.linear(b.flatten(b.globalAvgPool(x)), {.out_features = 10, .name = "fc"});
}

int fail(const absl::Status& status) {
  std::cerr << "custom_model: " << status << "\n";
  return 2;
}

}  // namespace

int main() {
  // 3. Build the module: variables, `init`, and the train_step / eval_step graphs
  //    (batch norm uses batch statistics in the first, running statistics in the second).
  tandem::ModelSpec spec{
      .name = "tiny_vgg", .image_shape = {1, 28, 28}, .num_classes = 10, .forward = tinyVgg};
  auto module = tandem::buildModule(spec, {.batch = 128});
  if (!module.ok()) return fail(module.status());
  tandem::ir::Module& m = **module;

  // 4. Compile for two devices with the pipeline `tandem dump` runs: autodiff (backward
  //    and SGD update), replicate (one copy per device), insert-collectives (split the
  //    batch, broadcast the initial weights, all_reduce the gradients in buckets), dce.
  //    The device kinds the compiler knows are registered by the program, as LLVM's tools
  //    call InitializeAllTargetInfos: their facts (alignment, layouts, dtypes) are asked by
  //    the passes, and a device list is checked against them.
  tandem::backend::registerTargets();
  auto devices = tandem::ir::parseTargetDevices("cpu:0,cpu:1");
  if (!devices.ok()) return fail(devices.status());
  std::string pipeline = tandem::passes::defaultPipeline({.devices = *devices});
  tandem::passes::PassManager pm;  // verifies the IR after every pass
  if (absl::Status s = pm.addPipeline(pipeline); !s.ok()) return fail(s);
  if (absl::Status s = pm.run(m); !s.ok()) return fail(s);

  // The result is plain IR. printGraph shows one graph; printModule(m) writes the whole
  // module, which `tandem opt FILE --passes ...` reads back.
  const tandem::ir::Graph& step = *m.graph(tandem::ir::kTrainGraph);
  std::cout << tandem::ir::printGraph(step);

  // Gradient buckets and the summed loss and correct count are all all_reduce nodes.
  int all_reduces = 0;
  for (const auto& node : step.nodes())
    if (node->op() == tandem::ir::Op::kAllReduce) ++all_reduces;
  std::cout << "// " << m.name() << ": " << m.countElements(tandem::ir::VarRole::kParam)
            << " parameters, " << step.numNodes() << " nodes in @train_step, " << all_reduces
            << " all_reduce nodes over " << tandem::ir::toString(m.devices()) << "\n";
  return 0;
}

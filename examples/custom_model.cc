// custom_model: define a network of your own with the Tandem DSL and train it
// data-parallel on two devices through the public API (tandem/tandem.h), or look at the
// training step the compiler made of it.
//
//   build/examples/custom_model [EPOCHS [TRAIN_IMAGES]]    trains on Fashion-MNIST (1 epoch)
//   build/examples/custom_model --print-step > train_step.tir
//
// --print-step prints the parallel train_step graph as text IR, then a one-line summary.
// The steps below are all a user writes: layers as plain C++ functions, a ModelSpec,
// then either tandem::train, or buildModule and the default pass pipeline to look inside.

#include <cstdio>
#include <cstdlib>
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
#include "tandem/tandem.h"

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

// 3. Train it: the devices, the batch split across them, the optimizer and its schedule,
//    and a callback per epoch. Errors name the option at fault (`TrainOptions::devices`).
int train(const tandem::ModelSpec& spec, int epochs, int64_t train_images) {
  tandem::Data data = tandem::Data::fashionMnist();
  if (train_images > 0) data.limit_train = train_images;
  auto model = tandem::train(
      spec,
      {.devices = "cpu:0,cpu:1",
       .batch = 128,
       .epochs = epochs,
       .optimizer = "adamw",
       .lr = 0.002,
       .schedule = "cosine"},
      data, {.on_epoch = [](const tandem::EpochMetrics& e) {
        std::printf("epoch %d: train loss %.4f, train accuracy %.4f, test accuracy %.4f\n", e.epoch,
                    e.train_loss, e.train_accuracy, e.test_accuracy);
        return true;
      }});
  if (!model.ok()) return fail(model.status());
  // 4. Save it: `tandem::Model::load(spec, options, data, dir)` continues from there.
  if (absl::Status s = model->save("custom_model.checkpoint", /*replace=*/true); !s.ok())
    return fail(s);
  std::printf("saved to custom_model.checkpoint\n");
  return 0;
}

// Or look inside: the module the DSL builds, and what the compiler makes of it.
int printStep(const tandem::ModelSpec& spec) {
  // Build the module: variables, `init`, and the train_step / eval_step graphs (batch
  // norm uses batch statistics in the first, running statistics in the second).
  auto module = tandem::buildModule(spec, {.batch = 128});
  if (!module.ok()) return fail(module.status());
  tandem::ir::Module& m = **module;

  // Compile for two devices with the pipeline `tandem dump` runs: autodiff (backward and
  // SGD update), replicate (one copy per device), insert-collectives (split the batch,
  // broadcast the initial weights, all_reduce the gradients in buckets), dce. The device
  // kinds the compiler knows are registered by the program, as LLVM's tools call
  // InitializeAllTargetInfos: their facts (alignment, layouts, dtypes) are asked by the
  // passes, and a device list is checked against them. (tandem::train does all this.)
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

}  // namespace

int main(int argc, char** argv) {
  tandem::ModelSpec spec{
      .name = "tiny_vgg", .image_shape = {1, 28, 28}, .num_classes = 10, .forward = tinyVgg};
  if (argc > 1 && std::string(argv[1]) == "--print-step") return printStep(spec);
  return train(spec, argc > 1 ? std::atoi(argv[1]) : 1, argc > 2 ? std::atoll(argv[2]) : 0);
}

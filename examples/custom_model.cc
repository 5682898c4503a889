// custom_model: define a network of your own with the Tandem DSL and train it
// data-parallel on two devices through the public API (tandem/tandem.h), or look at the
// training step the compiler made of it. It includes nothing but tandem/tandem.h, and builds
// against the installed package (examples/CMakeLists.txt) as in Tandem's tree.
//
//   custom_model [EPOCHS [TRAIN_IMAGES [DATA_DIR]]]   trains on Fashion-MNIST (1 epoch)
//   custom_model --print-step [DATA_DIR] > train_step.tir
//
// --print-step prints the parallel train_step graph as text IR, then a one-line summary.
// DATA_DIR holds Fashion-MNIST's IDX files (default /usr/share/datasets/fashion-mnist).
// The steps below are all a user writes: layers as plain C++ functions, a ModelSpec, then
// tandem::train, or Model::create and Model::trainStepText to look inside.

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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
//    Shapes are checked as each layer is added; a mistake is the error tandem::train
//    (or Model::create) returns, naming the layer's scope path and this file's line.
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
//    and a callback per epoch. Errors name the setting at fault (`TrainConfig::devices`).
int train(const tandem::ModelSpec& spec, const tandem::Data& data, int epochs) {
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
  // 4. Save it: `tandem::Model::load(spec, config, data, dir)` continues from there.
  if (absl::Status s = model->save("custom_model.checkpoint", /*replace=*/true); !s.ok())
    return fail(s);
  std::printf("saved to custom_model.checkpoint\n");
  return 0;
}

// Or look inside: Model::create compiles the model for its devices and loads it, training
// nothing yet. Its training step is what the compiler made of the DSL's graph: autodiff
// (backward and SGD update), replicate (one copy per device), insert-collectives (split
// the batch, broadcast the initial weights, all_reduce the gradients in buckets), dce.
int printStep(const tandem::ModelSpec& spec, tandem::Data data) {
  const tandem::TrainConfig config{.devices = "cpu:0,cpu:1", .batch = 128, .epochs = 1};
  data.limit_train = config.batch;  // one step's worth: nothing here trains
  auto model = tandem::Model::create(spec, config, data);
  if (!model.ok()) return fail(model.status());
  // Plain text IR (docs/IR.md), which `tandem opt` reads back inside a module.
  const std::string step = model->trainStepText();
  std::cout << step;

  // Gradient buckets and the summed loss and correct count are all all_reduce nodes.
  int all_reduces = 0;
  for (size_t at = step.find(" = all_reduce("); at != std::string::npos;
       at = step.find(" = all_reduce(", at + 1))
    ++all_reduces;
  std::cout << "// " << spec.name << ": " << all_reduces << " all_reduce nodes in @train_step over "
            << config.devices << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // A classifier: images in, logits out; classifierModel adds the softmax cross-entropy loss
  // and the accuracy metric (a model of another kind writes its own step: ModelSpec).
  const tandem::ModelSpec spec = tandem::classifierModel("tiny_vgg", {1, 28, 28}, 10, tinyVgg);
  const bool print_step = argc > 1 && std::string(argv[1]) == "--print-step";
  const int data_arg = print_step ? 2 : 3;
  tandem::Data data =
      tandem::Data::fashionMnist(argc > data_arg ? argv[data_arg] : tandem::Data::kFashionMnistDir);
  if (print_step) return printStep(spec, std::move(data));
  if (argc > 2 && std::atoll(argv[2]) > 0) data.limit_train = std::atoll(argv[2]);
  return train(spec, data, argc > 1 ? std::atoi(argv[1]) : 1);
}

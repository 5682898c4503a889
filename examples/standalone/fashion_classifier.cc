// fashion_classifier: a model of its own, written with Tandem's DSL, trained data-parallel
// on two CPU devices for one epoch of Fashion-MNIST through the installed package's
// public API, then saved, loaded back and evaluated again.
//
//   fashion_classifier [DATA_DIR [TRAIN_IMAGES]]
//
// DATA_DIR holds Fashion-MNIST's IDX files (default /usr/share/datasets/fashion-mnist);
// TRAIN_IMAGES trains on the first that many training images (default: all 60,000).

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "tandem/tandem.h"

namespace {

using tandem::Builder;
using tandem::Tensor;

// Two convolutions with pooling, then two linear layers: [N,1,28,28] -> [N,10].
Tensor smallCnn(Builder& b, Tensor x) {
  {
    auto features = b.scope("features");
    x = b.conv2d(x, {.out_channels = 16, .pad = 1, .bias = false, .name = "conv1"});
    x = b.maxPool2d(b.relu(b.batchNorm(x, {.name = "bn1"})), {.name = "pool1"});  // 16x14x14
    x = b.conv2d(x, {.out_channels = 32, .pad = 1, .name = "conv2"});
    x = b.maxPool2d(b.relu(x), {.name = "pool2"});  // 32x7x7
  }
  auto head = b.scope("head");
  x = b.relu(b.linear(b.flatten(x), {.out_features = 64, .name = "fc1"}));
  return b.linear(x, {.out_features = 10, .name = "fc2"});
}

int fail(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "fashion_classifier: %s: %s\n", what, std::string(status.message()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const tandem::ModelSpec spec = tandem::classifierModel("small_cnn", {1, 28, 28}, 10, smallCnn);
  tandem::Data data =
      tandem::Data::fashionMnist(argc > 1 ? argv[1] : tandem::Data::kFashionMnistDir);
  if (argc > 2) data.limit_train = std::atoll(argv[2]);
  const tandem::TrainConfig config{
      .devices = "cpu:0,cpu:1", .batch = 100, .epochs = 1, .optimizer = "adamw", .lr = 0.002};

  auto model = tandem::train(spec, config, data, {.on_epoch = [](const tandem::EpochMetrics& e) {
                               std::printf(
                                   "epoch %d: train loss %.4f, train accuracy %.4f, test "
                                   "accuracy %.4f, %.0f images/s\n",
                                   e.epoch, e.train_loss, e.train_accuracy, e.test_accuracy,
                                   e.images_per_second);
                               return true;
                             }});
  if (!model.ok()) return fail("training", model.status());
  auto trained = model->evaluate();
  if (!trained.ok()) return fail("evaluating", trained.status());
  std::printf("test accuracy %.4f\n", trained->accuracy);

  // A checkpoint of the trained model, loaded into a model of its own: the same accuracy.
  const std::string dir = "fashion_classifier.checkpoint";  // in the current directory
  if (absl::Status s = model->save(dir, /*replace=*/true); !s.ok()) return fail("saving", s);
  auto loaded = tandem::Model::load(spec, config, data, dir);
  if (!loaded.ok()) return fail("loading", loaded.status());
  auto reloaded = loaded->evaluate();
  if (!reloaded.ok()) return fail("evaluating the loaded model", reloaded.status());
  std::printf("loaded from %s: test accuracy %.4f\n", dir.c_str(), reloaded->accuracy);
  std::filesystem::remove_all(dir);
  return 0;
}

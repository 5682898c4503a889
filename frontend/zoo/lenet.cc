#include "frontend/zoo/zoo.h"

namespace tandem::zoo {

ModelSpec lenet(const ImageClasses& data) {
  const int64_t classes = data.classes;
  // Momentum 0.9 with Kaiming init reaches 0.90 in 10 epochs; the lessons' lr 0.2, no
  // momentum and N(0, 0.01) sit on the 2.30 plateau for an epoch first.
  TrainingDefaults defaults{.optimizer = ir::SgdConfig{.lr = 0.1, .momentum = 0.9}};
  return classifierModel(
      "lenet", data.image_shape, classes,
      [classes](Builder& b, Tensor x) {
        Tensor h =
            b.avgPool2d(b.relu(b.conv2d(x, {.out_channels = 20, .kernel = 3, .name = "conv1"})),
                        {.kernel = 2, .name = "pool1"});
        h = b.avgPool2d(b.relu(b.conv2d(h, {.out_channels = 50, .kernel = 5, .name = "conv2"})),
                        {.kernel = 2, .name = "pool2"});
        h = b.relu(b.linear(b.flatten(h), {.out_features = 128, .name = "fc1"}));
        return b.linear(h, {.out_features = classes, .name = "fc2"});
      },
      defaults);
}

}  // namespace tandem::zoo

namespace tandem::zoo {

ModelSpec lenetBn(const ImageClasses& data) {
  const int64_t classes = data.classes;
  // The lessons' batch-norm LeNet normalizes after each convolution; BN makes the
  // network forgiving of the learning rate, so the same SGD settings serve.
  return classifierModel(
      "lenet_bn", data.image_shape, classes,
      [classes](Builder& b, Tensor x) {
        auto block = [&b](Tensor in, int64_t channels, int64_t kernel, const char* conv,
                          const char* bn, const char* pool) {
          Tensor h = b.conv2d(in, {.out_channels = channels, .kernel = kernel, .name = conv});
          h = b.relu(b.batchNorm(h, {.name = bn}));
          return b.avgPool2d(h, {.kernel = 2, .name = pool});
        };
        Tensor h = block(x, 20, 3, "conv1", "bn1", "pool1");
        h = block(h, 50, 5, "conv2", "bn2", "pool2");
        h = b.relu(b.linear(b.flatten(h), {.out_features = 128, .name = "fc1"}));
        return b.linear(h, {.out_features = classes, .name = "fc2"});
      },
      lenet(data).defaults);
}

}  // namespace tandem::zoo

#include "frontend/zoo/zoo.h"

namespace tandem::zoo {

ModelSpec lenet() {
  ModelSpec spec;
  spec.name = "lenet";
  spec.image_shape = {1, 28, 28};
  spec.num_classes = 10;
  // Momentum 0.9 with Kaiming init reaches 0.90 in 10 epochs; the lessons' lr 0.2, no
  // momentum and N(0, 0.01) sit on the 2.30 plateau for an epoch first.
  spec.defaults = {.lr = 0.1, .momentum = 0.9};
  spec.forward = [](Builder& b, Tensor x) {
    Tensor h = b.avgPool2d(b.relu(b.conv2d(x, {.out_channels = 20, .kernel = 3, .name = "conv1"})),
                           {.kernel = 2, .name = "pool1"});
    h = b.avgPool2d(b.relu(b.conv2d(h, {.out_channels = 50, .kernel = 5, .name = "conv2"})),
                    {.kernel = 2, .name = "pool2"});
    h = b.relu(b.linear(b.flatten(h), {.out_features = 128, .name = "fc1"}));
    return b.linear(h, {.out_features = 10, .name = "fc2"});
  };
  return spec;
}

}  // namespace tandem::zoo

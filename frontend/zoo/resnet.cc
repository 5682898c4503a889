#include <array>

#include "absl/strings/str_cat.h"
#include "frontend/zoo/zoo.h"

namespace tandem::zoo {
namespace {

// ---- the small-image ResNet-18 of the lessons (d2l's Residual block) ------------------

/// conv3x3-bn-relu-conv3x3-bn, plus an optional 1x1 projection (no batch norm, as in
/// the lessons), added and passed through relu.
Tensor residual(Builder& b, Tensor x, int64_t channels, bool project, int64_t stride) {
  Tensor y = b.relu(b.batchNorm(
      b.conv2d(x, {.out_channels = channels, .stride = stride, .pad = 1, .name = "conv1"}),
      {.name = "bn1"}));
  y = b.batchNorm(b.conv2d(y, {.out_channels = channels, .pad = 1, .name = "conv2"}),
                  {.name = "bn2"});
  if (project)
    x = b.conv2d(x, {.out_channels = channels, .kernel = 1, .stride = stride, .name = "proj"});
  return b.relu(b.add(y, x));
}

// ---- ImageNet ResNets (torchvision layout, v1.5: stride on the 3x3) -------------------

Tensor convBn(Builder& b, Tensor x, int64_t channels, int64_t kernel, int64_t stride,
              const std::string& name) {
  return b.batchNorm(b.conv2d(x, {.out_channels = channels,
                                  .kernel = kernel,
                                  .stride = stride,
                                  .pad = kernel / 2,
                                  .bias = false,
                                  .name = "conv" + name}),
                     {.name = "bn" + name});
}

Tensor shortcut(Builder& b, Tensor x, int64_t channels, int64_t stride) {
  if (stride == 1 && x.valid() && x.dim(1) == channels) return x;
  return convBn(b, x, channels, 1, stride, "_proj");
}

Tensor basicBlock(Builder& b, Tensor x, int64_t channels, int64_t stride) {
  Tensor y = b.relu(convBn(b, x, channels, 3, stride, "1"));
  y = convBn(b, y, channels, 3, 1, "2");
  return b.relu(b.add(y, shortcut(b, x, channels, stride)));
}

Tensor bottleneck(Builder& b, Tensor x, int64_t channels, int64_t stride) {
  Tensor y = b.relu(convBn(b, x, channels, 1, 1, "1"));
  y = b.relu(convBn(b, y, channels, 3, stride, "2"));
  y = convBn(b, y, channels * 4, 1, 1, "3");
  return b.relu(b.add(y, shortcut(b, x, channels * 4, stride)));
}

ModelSpec imagenetResnet(std::string name, std::array<int, 4> blocks, bool use_bottleneck,
                         const ImageClasses& data) {
  const int64_t classes = data.classes;
  auto forward = [blocks, use_bottleneck, classes](Builder& b, Tensor x) {
    {
      auto s = b.scope("stem");
      x = b.relu(convBn(b, x, 64, 7, 2, ""));
      x = b.maxPool2d(x, {.kernel = 3, .stride = 2, .pad = 1, .name = "pool"});
    }
    for (int stage = 0; stage < 4; ++stage) {
      auto s = b.scope(absl::StrCat("stage", stage + 1));
      int64_t channels = int64_t{64} << stage;
      for (int i = 0; i < blocks[stage]; ++i) {
        auto blk = b.scope(absl::StrCat("block", i));
        int64_t stride = (i == 0 && stage > 0) ? 2 : 1;
        x = use_bottleneck ? bottleneck(b, x, channels, stride)
                           : basicBlock(b, x, channels, stride);
      }
    }
    auto s = b.scope("head");
    return b.linear(b.flatten(b.globalAvgPool(x)), {.out_features = classes, .name = "fc"});
  };
  return classifierModel(std::move(name), data.image_shape, classes, forward);
}

}  // namespace

ModelSpec resnet18(const ImageClasses& data) {
  const int64_t classes = data.classes;
  // The lesson's initialization: every conv and linear weight from N(0, 0.01) (biases and
  // batch norm as the frameworks start them). Batch norm undoes the small scale of the
  // convolutions; the small final layer starts the loss at ln 10 = 2.30. Kaiming on the
  // final layer started it at 7-11 at batch 64, so lr 0.1 first had to undo that.
  TrainingDefaults defaults{.optimizer = ir::SgdConfig{.lr = 0.1},
                            .weight_init = {ir::Initializer::Kind::kNormal, 0.01}};
  auto forward = [classes](Builder& b, Tensor x) {
    {
      auto s = b.scope("stem");
      x = b.relu(
          b.batchNorm(b.conv2d(x, {.out_channels = 64, .pad = 1, .name = "conv"}), {.name = "bn"}));
    }
    for (int stage = 0; stage < 4; ++stage) {
      auto s = b.scope(absl::StrCat("stage", stage + 1));
      int64_t channels = int64_t{64} << stage;
      for (int i = 0; i < 2; ++i) {
        auto blk = b.scope(absl::StrCat("block", i));
        bool downsample = i == 0 && stage > 0;  // the first stage keeps 64 channels
        x = residual(b, x, channels, downsample, downsample ? 2 : 1);
      }
    }
    auto s = b.scope("head");
    return b.linear(b.flatten(b.globalAvgPool(x)), {.out_features = classes, .name = "fc"});
  };
  return classifierModel("resnet18", data.image_shape, classes, forward, defaults);
}

ModelSpec resnet34(const ImageClasses& data) {
  return imagenetResnet("resnet34", {3, 4, 6, 3}, false, data);
}
ModelSpec resnet50(const ImageClasses& data) {
  return imagenetResnet("resnet50", {3, 4, 6, 3}, true, data);
}
ModelSpec resnet101(const ImageClasses& data) {
  return imagenetResnet("resnet101", {3, 4, 23, 3}, true, data);
}
ModelSpec resnet152(const ImageClasses& data) {
  return imagenetResnet("resnet152", {3, 8, 36, 3}, true, data);
}

}  // namespace tandem::zoo

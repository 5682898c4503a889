#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/model.h"

namespace tandem::zoo {

/// LeNet as in the multi-GPU lessons, for 1x28x28 images: conv 20@3x3, relu, avg-pool 2,
/// conv 50@5x5, relu, avg-pool 2, linear 800->128, relu, linear 128->10.
ModelSpec lenet();

/// LeNet with batch norm after each convolution (conv, batch norm, relu, avg-pool), as in
/// the lessons' batch-norm chapter: the small model that exercises fuse-conv-bn-relu.
ModelSpec lenetBn();

/// The small-image ResNet-18 of the lessons: 3x3 stride-1 stem with batch norm and relu,
/// no max-pool, 4 stages x 2 residual blocks at 64/128/256/512 channels, 1x1 projection
/// on downsampling blocks, global average pool, linear 512->classes. Convolutions carry
/// biases as in the lessons (11,175,818 parameters for 1 channel and 10 classes).
ModelSpec resnet18(int64_t in_channels = 1, int64_t num_classes = 10, int64_t image_size = 28);

/// ImageNet-shaped ResNets (3x224x224, 1000 classes; 7x7 stride-2 stem, max-pool,
/// bias-free convolutions, projection shortcuts with batch norm), for benchmarks at scale.
ModelSpec resnet34();
ModelSpec resnet50();
ModelSpec resnet101();
ModelSpec resnet152();

/// A Vision Transformer for 1x28x28 images (issue 24): 4x4 patches (49 tokens, a stride-4
/// convolution), a class token and a learned position embedding, width 64, 6 pre-norm
/// blocks with 4 heads and an MLP of 128 (erf GELU), dropout 0.1 after the attention
/// projection and in the MLP, a final LayerNorm and a linear head on the class token.
/// Defaults: AdamW lr 1e-3, weight decay 0.05, one epoch of warmup then cosine.
ModelSpec vit();

/// The smallest model that is not a CNN: two hidden layers of 256 with GELU and dropout
/// 0.1; the ViT's defaults.
ModelSpec mlp();

/// The zoo by name; the error lists the known names.
absl::StatusOr<ModelSpec> modelByName(absl::string_view name);
std::vector<std::string> modelNames();

}  // namespace tandem::zoo

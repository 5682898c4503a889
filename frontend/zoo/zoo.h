#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/model.h"

namespace tandem::zoo {

/// What a classifier of the zoo is made for: the shape of one image [C,H,W] and the number
/// of classes. The data a run reads gives them (`--model resnet18` on 32x32 RGB images of
/// 100 classes); the defaults are Fashion-MNIST's.
struct ImageClasses {
  std::vector<int64_t> image_shape{1, 28, 28};
  int64_t classes = 10;
};

/// ImageNet's images and classes, the ImageNet ResNets' defaults.
inline const ImageClasses kImagenet{.image_shape = {3, 224, 224}, .classes = 1000};

/// LeNet as in the multi-GPU lessons, for 1x28x28 images: conv 20@3x3, relu, avg-pool 2,
/// conv 50@5x5, relu, avg-pool 2, linear 800->128, relu, linear 128->10 (classes).
ModelSpec lenet(const ImageClasses& data = {});

/// LeNet with batch norm after each convolution (conv, batch norm, relu, avg-pool), as in
/// the lessons' batch-norm chapter: the small model that exercises fuse-conv-bn-relu.
ModelSpec lenetBn(const ImageClasses& data = {});

/// The small-image ResNet-18 of the lessons: 3x3 stride-1 stem with batch norm and relu,
/// no max-pool, 4 stages x 2 residual blocks at 64/128/256/512 channels, 1x1 projection
/// on downsampling blocks, global average pool, linear 512->classes. Convolutions carry
/// biases as in the lessons (11,175,818 parameters for 1 channel and 10 classes).
ModelSpec resnet18(const ImageClasses& data = {});

/// ImageNet-shaped ResNets (3x224x224, 1000 classes; 7x7 stride-2 stem, max-pool,
/// bias-free convolutions, projection shortcuts with batch norm), for benchmarks at scale.
ModelSpec resnet34(const ImageClasses& data = kImagenet);
ModelSpec resnet50(const ImageClasses& data = kImagenet);
ModelSpec resnet101(const ImageClasses& data = kImagenet);
ModelSpec resnet152(const ImageClasses& data = kImagenet);

/// A Vision Transformer for 1x28x28 images (issue 24): 4x4 patches (49 tokens, a stride-4
/// convolution), a class token and a learned position embedding, width 64, 6 pre-norm
/// blocks with 4 heads and an MLP of 128 (erf GELU), dropout 0.1 after the attention
/// projection and in the MLP, a final LayerNorm and a linear head on the class token.
/// Defaults: AdamW lr 1e-3, weight decay 0.05, one epoch of warmup then cosine. Other
/// image sizes get a patch grid of their size over 4.
ModelSpec vit(const ImageClasses& data = {});
/// The ViT's variants, for benchmarks.
struct VitOptions {
  /// Attention as the fused op (Builder::attention); false (the default): matmul, scale,
  /// softmax, matmul and the heads' transposes. At the ViT's 50 tokens and heads 16 wide
  /// oneDNN's batched products over all 512 heads of a device's batch beat the fused CPU
  /// kernel's per-head tiles (bench/attention_bench Step/vit: docs/PERF.md), so the ViT
  /// keeps them until the fused kernel batches heads as well.
  bool fused_attention = false;
  /// Dropout after the attention projection and in the MLP (0: none; a replay against
  /// PyTorch, whose generator is not Tandem's, takes it off).
  double dropout = 0.1;
};
ModelSpec vit(const ImageClasses& data, const VitOptions& options);

/// The smallest model that is not a CNN: two hidden layers of 256 with GELU and dropout
/// 0.1; the ViT's defaults.
ModelSpec mlp(const ImageClasses& data = {});

/// A GPT's size and what it is made for: nanoGPT's "baby GPT" for CPUs by default (context
/// 128, 4 layers of 4 heads, width 128, dropout 0.1); the vocabulary is the data's.
struct GptShape {
  int64_t vocab = 65;  // Shakespeare's characters; a run takes its data's vocabulary
  int64_t context = 128;
  int64_t layers = 4;
  int64_t heads = 4;
  int64_t width = 128;
  double dropout = 0.1;
};

/// Each size >= 1, the width a multiple of the heads, dropout in [0, 1); the error names
/// the size at fault.
absl::Status checkGptShape(const GptShape& s);

/// A decoder-only transformer as nanoGPT writes it (issue 43): inputs x (i32 token ids
/// [context]) and y (the next ids, labels of the vocabulary), token and learned position
/// embeddings, pre-norm blocks of causal multi-head attention (the fused op) and a GELU
/// MLP of 4x width, a final LayerNorm, and the output projection tied to the token
/// embedding. The loss is the cross-entropy per token (the evaluation's too); it predicts
/// `logits` [context, vocab] from x. Defaults: AdamW lr 1e-3, betas 0.9 / 0.99, weight
/// decay 0.1 on the matrices only, 100 warmup steps then cosine to lr / 10, gradient norm
/// clipped at 1.
ModelSpec gpt(const GptShape& shape = {});

/// The GPT size a checkpoint's settings give ("model.heads" and the others a gpt's
/// ModelSpec::made_for saves); sizes not among them keep GptShape's defaults.
absl::StatusOr<GptShape> gptShapeOf(
    const std::vector<std::pair<std::string, std::string>>& settings);

/// The zoo model a checkpoint of model `name` holds, remade from its settings where the
/// model saved what it is made for (a language model); else modelByName(name).
absl::StatusOr<ModelSpec> modelOfCheckpoint(
    absl::string_view name, const std::vector<std::pair<std::string, std::string>>& settings);

/// The zoo by name, made for `data`'s images and classes (each model's own defaults when
/// unset); the error lists the known names.
absl::StatusOr<ModelSpec> modelByName(absl::string_view name,
                                      const std::optional<ImageClasses>& data = std::nullopt);
std::vector<std::string> modelNames();
/// Whether the zoo's `name` is a language model (made for a vocabulary and a context:
/// GptShape), not an image classifier.
bool isLanguageModel(absl::string_view name);

}  // namespace tandem::zoo

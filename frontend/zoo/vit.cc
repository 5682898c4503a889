// The Vision Transformer and the MLP of issue 24, for 1x28x28 images. Attention is matmul,
// scale, softmax, matmul and the heads' transposes, or the fused op (Builder::attention,
// issue 43) a VitOptions away: zoo.h says why the default is the first.

#include <cmath>
#include <string>

#include "frontend/zoo/token_linear.h"
#include "frontend/zoo/zoo.h"

namespace tandem::zoo {
namespace {

using ir::DType;
using ir::Initializer;
using ir::TensorType;
using ir::VarRole;

// PyTorch's ViT implementations start the class token and position embedding at
// N(0, 0.02) (timm's trunc_normal_(std=.02), without the truncation at 2 sigma, which
// almost never binds at that width).
const Initializer kEmbeddingInit{Initializer::Kind::kNormal, 0.02};

struct VitShape {
  int64_t patch = 4;    // 4x4 patches of a 28x28 image: 7x7 = 49 tokens
  int64_t width = 64;   // token width
  int64_t depth = 6;    // pre-norm blocks
  int64_t heads = 4;    // attention heads of width / heads = 16 each
  int64_t mlp = 128;    // hidden width of each block's MLP
  double dropout = 0.1; // after the attention projection and in the MLP
  bool fused_attention = false;
};

// Multi-head self-attention of a pre-normed [N, T, D] input: per head softmax(q k^T /
// sqrt(d)) v, heads concatenated, then the output projection and its dropout.
Tensor attention(Builder& b, Tensor x, const VitShape& s, int64_t tokens) {
  auto _ = b.scope("attn");
  const int64_t head = s.width / s.heads;
  // [N, T, D] -> [N, H, T, d]
  auto heads = [&](const char* name) {
    Tensor t = tokenLinear(b, x, tokens, s.width, name);
    return b.transpose(b.reshape(t, {-1, tokens, s.heads, head}), {0, 2, 1, 3});
  };
  if (s.fused_attention) {  // heads as strides: q, k and v stay [N, T, D]
    Tensor q = tokenLinear(b, x, tokens, s.width, "q"), k = tokenLinear(b, x, tokens, s.width, "k"),
           v = tokenLinear(b, x, tokens, s.width, "v");
    Tensor mixed = b.attention(q, k, v, {.heads = s.heads});
    return b.dropout(tokenLinear(b, mixed, tokens, s.width, "proj"), s.dropout);
  }
  Tensor q = heads("q"), k = heads("k"), v = heads("v");
  Tensor scores = b.scale(b.matmul(q, k, {.trans_b = true}), 1.0 / std::sqrt(double(head)));
  Tensor mixed = b.matmul(b.softmax(scores, -1), v);  // [N, H, T, d]
  Tensor merged = b.reshape(b.transpose(mixed, {0, 2, 1, 3}), {-1, tokens, s.width});
  return b.dropout(tokenLinear(b, merged, tokens, s.width, "proj"), s.dropout);
}

Tensor mlpBlock(Builder& b, Tensor x, const VitShape& s, int64_t tokens) {
  auto _ = b.scope("mlp");
  Tensor h = b.dropout(b.gelu(tokenLinear(b, x, tokens, s.mlp, "fc1")), s.dropout);
  return b.dropout(tokenLinear(b, h, tokens, s.width, "fc2"), s.dropout);
}

// AdamW with one epoch of warmup, then cosine, as ViTs are trained (issue 24's defaults).
TrainingDefaults transformerDefaults() {
  TrainingDefaults d;
  d.optimizer = ir::AdamwConfig{.lr = 1e-3, .weight_decay = 0.05};
  d.schedule = "cosine";
  d.warmup_epochs = 1;
  return d;
}

}  // namespace

ModelSpec vit(const ImageClasses& data, const VitOptions& options) {
  const int64_t classes = data.classes;
  auto forward = [classes, options](Builder& b, Tensor x) {
    VitShape s;
    s.fused_attention = options.fused_attention;
    s.dropout = options.dropout;
    // Patches: a stride-4 4x4 convolution, [N, D, 7, 7] -> [N, 49, D] for 28x28 images.
    Tensor p = b.conv2d(x, {.out_channels = s.width, .kernel = s.patch, .stride = s.patch,
                            .name = "patch"});
    if (!p.valid()) return p;
    const int64_t patches = p.dim(2) * p.dim(3), tokens = patches + 1;
    p = b.transpose(b.reshape(p, {-1, s.width, patches}), {0, 2, 1});
    // The class token first (its size-1 batch axis repeats), then the position embedding.
    Tensor cls = b.variable("cls", TensorType{DType::kF32, {1, 1, s.width}}, VarRole::kParam,
                            kEmbeddingInit);
    Tensor pos = b.variable("pos", TensorType{DType::kF32, {1, tokens, s.width}},
                            VarRole::kParam, kEmbeddingInit);
    Tensor h = b.addBroadcast(b.concat({cls, p}, 1), pos);
    for (int64_t i = 0; i < s.depth; ++i) {
      auto _ = b.scope("block" + std::to_string(i));
      h = b.add(h, attention(b, b.layerNorm(h, {.name = "ln1"}), s, tokens));
      h = b.add(h, mlpBlock(b, b.layerNorm(h, {.name = "ln2"}), s, tokens));
    }
    Tensor cls_out = b.reshape(b.slice(b.layerNorm(h, {.name = "ln"}), 1, 0, 1), {-1, s.width});
    return b.linear(cls_out, {.out_features = classes, .name = "head"});
  };
  return classifierModel("vit", data.image_shape, classes, forward, transformerDefaults());
}

ModelSpec vit(const ImageClasses& data) { return vit(data, VitOptions{}); }

ModelSpec mlp(const ImageClasses& data) {
  const int64_t classes = data.classes;
  auto forward = [classes](Builder& b, Tensor x) {
    Tensor h = b.flatten(x);
    for (const char* name : {"fc1", "fc2"})
      h = b.dropout(b.gelu(b.linear(h, {.out_features = 256, .name = name})), 0.1);
    return b.linear(h, {.out_features = classes, .name = "head"});
  };
  return classifierModel("mlp", data.image_shape, classes, forward, transformerDefaults());
}

}  // namespace tandem::zoo

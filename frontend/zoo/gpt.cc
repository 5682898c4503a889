// A decoder-only transformer as nanoGPT (Karpathy) writes it (issue 43): token and learned
// position embeddings, pre-norm blocks of causal multi-head attention and a GELU MLP of 4x
// width, a final LayerNorm, and the output projection tied to the token embedding (one
// variable read twice: autodiff sums its two gradients before the one reduction).

#include <cmath>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "frontend/zoo/token_linear.h"
#include "frontend/zoo/zoo.h"
#include "ir/status_macros.h"

namespace tandem::zoo {
namespace {

using ir::DType;
using ir::Initializer;
using ir::TensorType;
using ir::VarRole;

// nanoGPT's _init_weights: N(0, 0.02) for every linear weight and embedding, zero biases
// (the builder's), and the residual projections (c_proj) at 0.02 / sqrt(2 * layers).
Initializer normal(double std) { return Initializer{Initializer::Kind::kNormal, std}; }

/// Where a block's attention reads its keys and values: the whole sequence (training,
/// prediction), or one token at a position over the layer's caches (generation).
struct Decoding {
  Tensor position;  // i32 [N]
  int64_t layer = 0;
};

Tensor gptBlock(Builder& b, Tensor h, const GptShape& s, const Decoding* decoding = nullptr) {
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(s.layers));
  const int64_t t = decoding != nullptr ? 1 : s.context;
  {
    auto _ = b.scope("attn");
    Tensor a = b.layerNorm(h, {.name = "ln_1"});
    Tensor q = tokenLinear(b, a, t, s.width, "q", normal(0.02)),
           k = tokenLinear(b, a, t, s.width, "k", normal(0.02)),
           v = tokenLinear(b, a, t, s.width, "v", normal(0.02));
    Tensor y;
    if (decoding != nullptr) {
      // This layer's caches, [N, context, width]: the token's key and value written at its
      // position, then attended to up to it.
      const TensorType cache{DType::kF32, {h.dim(0), s.context, s.width}};
      auto cached = [&](const char* which, Tensor x) {
        Tensor var = b.variable(absl::StrCat("h", decoding->layer, ".attn.", which, "_cache"),
                                cache, VarRole::kBuffer, Initializer{Initializer::Kind::kZeros});
        return b.kvWrite(var, x, decoding->position);
      };
      y = b.cachedAttention(q, cached("k", k), cached("v", v), decoding->position,
                            {.heads = s.heads});
    } else {
      y = b.attention(q, k, v, {.heads = s.heads, .causal = true, .dropout = s.dropout});
    }
    h = b.add(h, b.dropout(tokenLinear(b, y, t, s.width, "c_proj", normal(proj_std)), s.dropout));
  }
  auto _ = b.scope("mlp");
  Tensor m = b.layerNorm(h, {.name = "ln_2"});
  m = b.gelu(tokenLinear(b, m, t, 4 * s.width, "c_fc", normal(0.02)));
  return b.add(h, b.dropout(tokenLinear(b, m, t, s.width, "c_proj", normal(proj_std)), s.dropout));
}

Tensor tokenTable(Builder& b, const GptShape& s) {
  return b.variable("wte.table", TensorType{DType::kF32, {s.vocab, s.width}}, VarRole::kParam,
                    normal(0.02));
}

Tensor positionTable(Builder& b, const GptShape& s) {
  return b.variable("wpe.table", TensorType{DType::kF32, {1, s.context, s.width}}, VarRole::kParam,
                    normal(0.02));
}

// The blocks, the final LayerNorm and the output projection, the token embedding's table
// read a second time (tied): logits [N, T, vocab] of the embedded tokens h [N, T, width].
Tensor blocksAndHead(Builder& b, Tensor h, Tensor wte, const GptShape& s,
                     const Tensor* position = nullptr) {
  for (int64_t i = 0; i < s.layers; ++i) {
    auto _ = b.scope(absl::StrCat("h", i));
    const Decoding decoding{position != nullptr ? *position : Tensor(), i};
    h = gptBlock(b, h, s, position != nullptr ? &decoding : nullptr);
  }
  h = b.layerNorm(h, {.name = "ln_f"});
  return b.matmul(h, wte, {.trans_b = true});
}

// The logits [N, T, vocab] of ids [N, T].
Tensor gptLogits(Builder& b, Tensor ids, const GptShape& s) {
  if (!ids.valid()) return ids;
  Tensor wte = tokenTable(b, s);
  Tensor h =
      b.dropout(b.addBroadcast(b.embedding(ids, wte, "wte"), positionTable(b, s)), s.dropout);
  return blocksAndHead(b, h, wte, s);
}

// Generation's step: the logits [N, 1, vocab] of one token per row [N, 1] at `position`
// (i32 [N]), its position embedding the row of the table it names.
Tensor gptDecode(Builder& b, Tensor token, Tensor position, const GptShape& s) {
  if (!token.valid() || !position.valid()) return Tensor();
  Tensor wte = tokenTable(b, s);
  Tensor positions = b.reshape(positionTable(b, s), {s.context, s.width});
  Tensor h = b.add(b.embedding(token, wte, "wte"),
                   b.embedding(b.reshape(position, {-1, 1}), positions, "wpe"));
  return blocksAndHead(b, h, wte, s, &position);
}

// nanoGPT's recipe for its small CPU models: AdamW lr 1e-3, betas 0.9 / 0.99, weight decay
// 0.1 on the matrices only, 100 warmup steps then cosine to lr / 10, the gradient norm
// clipped at 1.
TrainingDefaults gptDefaults() {
  TrainingDefaults d;
  d.optimizer = ir::AdamwConfig{.lr = 1e-3, .beta2 = 0.99, .weight_decay = 0.1};
  d.decay_matrices_only = true;
  d.schedule = "cosine:0.1";
  d.warmup_steps = 100;
  d.clip_grad_norm = 1.0;
  d.batch = 64;
  d.weight_init = normal(0.02);  // what the header says: every layer names its own
  return d;
}

}  // namespace

absl::Status checkGptShape(const GptShape& s) {
  for (const auto& [what, value] :
       {std::pair{"vocabulary", s.vocab}, std::pair{"context", s.context},
        std::pair{"layers", s.layers}, std::pair{"heads", s.heads}, std::pair{"width", s.width}})
    if (value < 1)
      return absl::InvalidArgumentError(absl::StrCat("gpt: ", what, " must be >= 1, got ", value));
  if (s.width % s.heads != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("gpt: width ", s.width, " does not divide into ", s.heads, " heads"));
  if (!(s.dropout >= 0 && s.dropout < 1))
    return absl::InvalidArgumentError(
        absl::StrCat("gpt: dropout must be in [0, 1), got ", s.dropout));
  return absl::OkStatus();
}

absl::StatusOr<GptShape> gptShapeOf(
    const std::vector<std::pair<std::string, std::string>>& settings) {
  GptShape s;
  for (const auto& [key, text] : settings) {
    if (!absl::StartsWith(key, "model.")) continue;
    const std::string_view name = std::string_view(key).substr(6);
    bool parsed = true;
    if (name == "dropout")
      parsed = absl::SimpleAtod(text, &s.dropout);
    else if (int64_t* field = name == "vocab"     ? &s.vocab
                              : name == "context" ? &s.context
                              : name == "layers"  ? &s.layers
                              : name == "heads"   ? &s.heads
                              : name == "width"   ? &s.width
                                                  : nullptr)
      parsed = absl::SimpleAtoi(text, field);
    if (!parsed)
      return absl::InvalidArgumentError(
          absl::StrCat("gpt: setting ", key, " is '", text, "', not a number"));
  }
  RETURN_IF_ERROR(checkGptShape(s));
  return s;
}

ModelSpec gpt(const GptShape& s) {
  ModelSpec spec{.name = "gpt",
                 .inputs = {{.name = "x", .dtype = DType::kI32, .shape = {s.context}},
                            {.name = "y", .dtype = DType::kI32, .shape = {s.context}}},
                 .labels = ClassLabels{.input = "y", .classes = s.vocab},
                 .defaults = gptDefaults()};
  spec.made_for = {{"vocab", absl::StrCat(s.vocab)},   {"context", absl::StrCat(s.context)},
                   {"layers", absl::StrCat(s.layers)}, {"heads", absl::StrCat(s.heads)},
                   {"width", absl::StrCat(s.width)},   {"dropout", absl::StrCat(s.dropout)}};
  spec.step = [s](Builder& b, const StepInputs& in) -> StepOutputs {
    Tensor logits = gptLogits(b, in["x"], s);
    if (!logits.valid()) return {};
    // Training: the mean over every token of the global batch. Evaluation: per window the
    // mean over its tokens, summed over the windows (the pass divides by them), so both
    // report the loss per token.
    if (b.training()) return {.loss = b.crossEntropy(logits, in["y"], {.axis = -1})};
    Tensor sum = b.crossEntropy(logits, in["y"], {.reduction = ir::Reduction::kSum, .axis = -1});
    return {.loss = b.scale(sum, 1.0 / static_cast<double>(s.context))};
  };
  spec.predict = PredictSpec{
      .inputs = {"x"}, .outputs = {"logits"}, .forward = [s](Builder& b, const StepInputs& in) {
        return std::vector<Prediction>{{.name = "logits", .value = gptLogits(b, in["x"], s)}};
      }};
  spec.decode =
      DecodeSpec{.context = s.context, .step = [s](Builder& b, Tensor token, Tensor position) {
                   return gptDecode(b, token, position, s);
                 }};
  return spec;
}

}  // namespace tandem::zoo

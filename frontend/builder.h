#pragma once

#include <cstdint>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "ir/ir.h"

namespace tandem {

class BuilderInternals;

/// A typed handle to a tensor while a model is being built. A handle stays valid for the
/// graph it was made in. After a build error every handle is "poisoned": layers applied
/// to it do nothing and the error is reported once by buildModule().
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(ir::Value* v) : value_(v) {}
  bool valid() const { return value_ != nullptr; }
  ir::Value* value() const { return value_; }
  /// Shape of the tensor; empty for a poisoned handle.
  const ir::Shape& shape() const;
  int64_t dim(int i) const { return shape().at(static_cast<size_t>(i)); }

 private:
  ir::Value* value_ = nullptr;
};

/// Options of Builder::conv2d, NCHW. Kernel, stride and padding are one int for both axes
/// or {h, w} (`.kernel = {7, 1}`).
struct Conv2dOptions {
  int64_t out_channels = 0;
  ir::Hw kernel = 3;
  ir::Hw stride = 1;
  ir::Hw pad = 0;
  // Channel groups: input and output channels split into `groups` blocks, output block g
  // reading input block g only (in = out = groups: depthwise, as in MobileNet).
  int64_t groups = 1;
  bool bias = true;
  std::optional<ir::Initializer> init;  // weights; unset: the build's default
  std::string name;                     // unset: "conv", "conv_1", ...
};

struct BatchNormOptions {
  double momentum = 0.1;  // weight of the new batch statistic in the running average
  double eps = 1e-5;
  std::string name;  // unset: "bn", "bn_1", ...
};

struct MatmulOptions {
  bool trans_a = false, trans_b = false;
};

struct LayerNormOptions {
  double eps = 1e-5;  // nn.LayerNorm's default
  std::string name;   // unset: "ln", "ln_1", ...
};

/// Options of Builder::attention (F.scaled_dot_product_attention over heads).
struct AttentionOptions {
  int64_t heads = 1;            // q, k and v's last axis is heads * head width
  bool causal = false;          // query i sees keys 0..i (is_causal)
  double dropout = 0;           // on the probabilities, in the training step only; in [0, 1)
  std::optional<double> scale;  // unset: 1 / sqrt(head width)
  std::string name;             // unset: "attention", "attention_1", ...
};

struct Pool2dOptions {  // kernel, stride and padding: one int for both axes, or {h, w}
  ir::Hw kernel = 2;
  ir::Hw stride = 0;  // 0: same as kernel
  ir::Hw pad = 0;
  bool ceil_mode = false;  // the output extent rounded up (PyTorch's ceil_mode)
  std::string name;
};

struct LinearOptions {
  int64_t out_features = 0;
  bool bias = true;
  std::optional<ir::Initializer> init;
  std::string name;  // unset: "fc", "fc_1", ...
};

/// Options of the losses (Builder::mseLoss and the others). A loss is an f32 scalar (f32[]):
/// mean divides the sum by the global count (the global batch times the elements per
/// example), so that the per-device losses of a replicated step add up to the global
/// mean on any split; sum does not divide.
struct LossOptions {
  ir::Reduction reduction = ir::Reduction::kMean;
  std::string name;  // unset: "loss", "loss_1", ...
};

/// Options of Builder::crossEntropy (nn.CrossEntropyLoss's, over integer labels).
struct CrossEntropyOptions {
  ir::Reduction reduction = ir::Reduction::kMean;
  /// The logits' class axis; negative counts from the end ([N, C]: 1; [B, T, V]: -1). Not
  /// 0, the batch axis.
  int64_t axis = 1;
  /// Labels equal to it count for nothing (torch's ignore_index). When set (or with class
  /// weights), mean divides by the global number of counted targets (the sum of their
  /// weights), as PyTorch's does, on any split: target_weight_sum, summed over the devices.
  /// Unset: negative labels (padding of a last partial batch) still count for nothing, and
  /// mean divides by the global number of targets, as the classifiers' loss does.
  std::optional<int64_t> ignore_index;
  double label_smoothing = 0;  // in [0, 1)
  /// Class weights (torch's `weight`): f32[classes] values, or a tensor the model
  /// computes (not from trained weights: the weights get no gradient). At most one.
  std::vector<float> class_weights;
  Tensor weight;
  std::string name;  // unset: "loss", "loss_1", ...
};

/// Settings that apply to the whole build.
struct BuildOptions {
  /// Global batch size of the training and evaluation steps.
  int64_t batch = 256;
  /// Initializer of conv and linear weights that do not name their own.
  ir::Initializer weight_init{ir::Initializer::Kind::kKaiming};
  /// The training loss's label smoothing in [0, 1) (nn.CrossEntropyLoss(label_smoothing)).
  /// The evaluation loss stays the plain cross-entropy, as timm's validation is, so test
  /// losses compare across settings.
  double label_smoothing = 0;
};

/// The model-building DSL. Layers create their parameters as module variables named after
/// the layer's scope path ("stage1.block0.conv1.w"), so the same model code builds the
/// training step (batch statistics) and the evaluation step (running statistics) over one
/// set of variables. Shape errors are caught when the layer is added and name the layer.
class Builder {
 public:
  using Loc = std::source_location;

  /// RAII guard returned by scope(); the scope ends when it is destroyed.
  class ScopeGuard {
   public:
    ~ScopeGuard() { b_.scopes_.pop_back(); }
    ScopeGuard(const ScopeGuard&) = delete;
    ScopeGuard& operator=(const ScopeGuard&) = delete;

   private:
    friend class Builder;
    explicit ScopeGuard(Builder& b) : b_(b) {}
    Builder& b_;
  };
  /// Opens a named scope ("stage1", then "block0" gives "stage1.block0").
  [[nodiscard]] ScopeGuard scope(absl::string_view name);

  /// True while building the training step (batch norm uses batch statistics).
  bool training() const { return training_; }
  const BuildOptions& options() const { return opts_; }

  Tensor conv2d(Tensor x, const Conv2dOptions& o, Loc loc = Loc::current());
  Tensor batchNorm(Tensor x, const BatchNormOptions& o = {}, Loc loc = Loc::current());
  /// Layer normalization over the last axis with a learned scale (ones) and shift
  /// (zeros): nn.LayerNorm(x.shape[-1]); variables "<name>.gamma", "<name>.beta".
  Tensor layerNorm(Tensor x, const LayerNormOptions& o = {}, Loc loc = Loc::current());
  Tensor relu(Tensor x, Loc loc = Loc::current());
  /// softmax / log-softmax over `axis` (negative counts from the end, as in PyTorch).
  Tensor softmax(Tensor x, int64_t axis = -1, Loc loc = Loc::current());
  Tensor logSoftmax(Tensor x, int64_t axis = -1, Loc loc = Loc::current());
  /// GELU, exact (erf) or PyTorch's approximate="tanh" form.
  enum class Gelu { kErf, kTanh };
  Tensor gelu(Tensor x, Gelu form = Gelu::kErf, Loc loc = Loc::current());
  Tensor tanh(Tensor x, Loc loc = Loc::current());
  /// MobileNet's activations: min(max(x, 0), 6); x * relu6(x + 3) / 6; relu6(x + 3) / 6.
  Tensor relu6(Tensor x, Loc loc = Loc::current());
  Tensor hardswish(Tensor x, Loc loc = Loc::current());
  Tensor hardsigmoid(Tensor x, Loc loc = Loc::current());
  /// x * sigmoid(x) (nn.SiLU, EfficientNet's Swish).
  Tensor silu(Tensor x, Loc loc = Loc::current());
  /// min(max(x, lo), hi) (torch.clamp); its gradient passes where lo <= x <= hi.
  Tensor clip(Tensor x, double lo, double hi, Loc loc = Loc::current());
  /// x padded along every axis: pads[a] before and pads[rank + a] after axis a (ONNX's
  /// order), with `value` (kConstant), x's mirror image (kReflect: each pad below the
  /// axis' extent) or its edge (kEdge): F.pad's constant, reflect and replicate.
  Tensor pad(Tensor x, std::vector<int64_t> pads, ir::PadMode mode = ir::PadMode::kConstant,
             double value = 0, Loc loc = Loc::current());
  /// Inverted dropout with drop probability p in [0, 1) (nn.Dropout): in the training step
  /// a dropout node reading @step, whose masks depend on the sample, not on the split of
  /// the batch over devices; in the evaluation step x itself.
  Tensor dropout(Tensor x, double p, Loc loc = Loc::current());
  Tensor maxPool2d(Tensor x, const Pool2dOptions& o, Loc loc = Loc::current());
  Tensor avgPool2d(Tensor x, const Pool2dOptions& o, Loc loc = Loc::current());
  Tensor globalAvgPool(Tensor x, Loc loc = Loc::current());
  Tensor flatten(Tensor x, Loc loc = Loc::current());
  Tensor linear(Tensor x, const LinearOptions& o, Loc loc = Loc::current());
  /// nn.Embedding(vocab, dim): the rows of a learned table f32[vocab, dim] (variable
  /// "<name>.table", initialized N(0, 1) as PyTorch's is) that the i32 ids (any shape)
  /// pick: [ids..., dim]. Unnamed layers are "embedding", "embedding_1", ...
  Tensor embedding(Tensor ids, int64_t vocab, int64_t dim, std::string name = "",
                   Loc loc = Loc::current());
  /// The rows of a given table f32[vocab, dim] (a variable the model declared, which it
  /// may read elsewhere too: a language model's output projection tied to it).
  Tensor embedding(Tensor ids, Tensor table, std::string name = "", Loc loc = Loc::current());
  /// Fused multi-head attention, softmax(scale q k^T [causal mask]) v per head, with q
  /// [N, Tq, H*d], k [N, Tk, H*d], v [N, Tk, H*dv] -> [N, Tq, H*dv]: head h is columns
  /// h*d .. h*d+d-1 (no transposes). One op (ir's `attention`): tiles with an online
  /// softmax, memory linear in the sequence; dropout on the probabilities draws masks
  /// that do not depend on the split of the batch, as dropout() does.
  Tensor attention(Tensor q, Tensor k, Tensor v, const AttentionOptions& o,
                   Loc loc = Loc::current());
  /// Generation with a KV cache: writes x [N, 1, W] into row `position` (i32 [N], the same
  /// for every row) of the variable `cache` [N, T, W] reads, in place, and returns the
  /// cache so written (what cachedAttention reads, after the write).
  Tensor kvWrite(Tensor cache, Tensor x, Tensor position, Loc loc = Loc::current());
  /// One new token q [N, 1, H*d] at `position` attending over keys and values 0..position
  /// of the caches k and v [N, T, ...] (kvWrite's results): o.heads and o.scale as
  /// attention's (no mask beyond the position, no dropout).
  Tensor cachedAttention(Tensor q, Tensor k, Tensor v, Tensor position, const AttentionOptions& o,
                         Loc loc = Loc::current());
  Tensor add(Tensor a, Tensor b, Loc loc = Loc::current());
  /// op(a) * op(b) over the last two axes, batched over the leading ones (a plain matrix
  /// beside a batched operand is shared by the batch); op(x) = x^T when trans_x.
  Tensor matmul(Tensor a, Tensor b, const MatmulOptions& o = {}, Loc loc = Loc::current());
  Tensor reshape(Tensor x, std::vector<int64_t> shape, Loc loc = Loc::current());
  /// Permutes the axes: result.shape[i] = x.shape[perm[i]] (PyTorch's permute).
  Tensor transpose(Tensor x, std::vector<int64_t> perm, Loc loc = Loc::current());
  /// factor * x (attention's 1/sqrt(d)).
  Tensor scale(Tensor x, double factor, Loc loc = Loc::current());
  /// a + b and a * b under numpy's broadcasting (a position embedding [1,T,D] added to
  /// [N,T,D]); add() is the same-shape sum that fusion and layouts know.
  Tensor addBroadcast(Tensor a, Tensor b, Loc loc = Loc::current());
  Tensor mulBroadcast(Tensor a, Tensor b, Loc loc = Loc::current());
  /// 1 where `a KIND b` holds, else 0 (a mask in f32; torch.eq, lt, ... then .float()),
  /// broadcast; no gradient flows through it.
  Tensor compare(Tensor a, ir::Comparison kind, Tensor b, Loc loc = Loc::current());
  /// a where cond is nonzero, else b (torch.where), the three broadcast.
  Tensor where(Tensor cond, Tensor a, Tensor b, Loc loc = Loc::current());
  /// The remainder of a / b with the sign of b (torch.remainder), or of a with fmod
  /// (torch.fmod), broadcast.
  Tensor mod(Tensor a, Tensor b, bool fmod = false, Loc loc = Loc::current());
  /// Sum / mean over `axis`; keepdim keeps it with size 1 (PyTorch's keepdim, default off).
  Tensor sum(Tensor x, int64_t axis, bool keepdim = false, Loc loc = Loc::current());
  Tensor mean(Tensor x, int64_t axis, bool keepdim = false, Loc loc = Loc::current());
  /// torch.cat(xs, axis) within the device; a size-1 axis off `axis` repeats (a class
  /// token [1,1,D] prepended to [N,T,D]).
  Tensor concat(std::vector<Tensor> xs, int64_t axis, Loc loc = Loc::current());
  /// x[start:end] along `axis` (end exclusive).
  Tensor slice(Tensor x, int64_t axis, int64_t start, int64_t end, Loc loc = Loc::current());

  /// Losses (f32[] results; LossOptions says how they reduce). x and target are f32 of
  /// one shape [N, ...]; the target gets no gradient.
  /// (x - target)^2 (nn.MSELoss).
  Tensor mseLoss(Tensor x, Tensor target, const LossOptions& o = {}, Loc loc = Loc::current());
  /// |x - target| (nn.L1Loss).
  Tensor l1Loss(Tensor x, Tensor target, const LossOptions& o = {}, Loc loc = Loc::current());
  /// Huber: 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (nn.SmoothL1Loss(beta)).
  Tensor smoothL1Loss(Tensor x, Tensor target, double beta = 1.0, const LossOptions& o = {},
                      Loc loc = Loc::current());
  /// Binary cross-entropy of sigmoid(x) against target in [0, 1], in the numerically
  /// stable form (nn.BCEWithLogitsLoss); pos_weight (empty handle: none) has the shape of
  /// x's trailing axes ([C] for [N, C]) and broadcasts over the leading ones.
  Tensor bceWithLogits(Tensor x, Tensor target, Tensor pos_weight = Tensor(),
                       const LossOptions& o = {}, Loc loc = Loc::current());
  /// Softmax cross-entropy of logits (rank >= 2, classes on o.axis) against i32 labels of
  /// the logits' shape less that axis (nn.CrossEntropyLoss with ignore_index, weight and
  /// label_smoothing).
  Tensor crossEntropy(Tensor logits, Tensor labels, const CrossEntropyOptions& o = {},
                      Loc loc = Loc::current());

  /// A persistent variable read in the current graph (created on first use; a second
  /// declaration must agree on type and role).
  Tensor variable(absl::string_view name, const ir::TensorType& type, ir::VarRole role,
                  const ir::Initializer& init, Loc loc = Loc::current());

  /// The first error of the build, if any.
  const absl::Status& status() const { return status_; }
  /// Records an error of layers built outside this class's methods (an imported ONNX
  /// graph's), so that buildModule() reports it like the DSL's own.
  void fail(absl::Status s) { record(std::move(s)); }

 private:
  // The constructor and graph-level entry points below are the compiler's, not a model's:
  // buildModule and the ONNX importer reach them through BuilderInternals
  // (frontend/builder_internals.h, not installed).
  friend class BuilderInternals;
  /// A builder of `module`'s graphs; a model gets one from buildModule.
  Builder(ir::Module& module, const BuildOptions& opts) : module_(module), opts_(opts) {}
  /// Which graph the next layers go to.
  void beginGraph(ir::Graph* g, bool training);
  Tensor addInput(absl::string_view name, ir::TensorType type);
  /// Adds the node `spec` describes (an op's typed creator fills it in:
  /// `ir::SigmoidArgs{.x = x.value()}.spec()`) in the current scope, named after `layer`;
  /// returns its result `result`. A null operand (an empty handle's value) is an error
  /// naming the layer.
  Tensor addNode(ir::NodeSpec spec, absl::string_view layer, Loc loc, size_t result = 0);

  std::string scopePath() const;
  /// {x, weight, bias?} of a conv or linear layer (weight_shape[0] outputs); empty after
  /// recording an error when the output count is not positive.
  std::vector<Tensor> weightedOperands(Tensor x, const std::string& path, absl::string_view op,
                                       absl::string_view count_name, ir::Shape weight_shape,
                                       bool bias, const std::optional<ir::Initializer>& init,
                                       Loc loc);
  /// Full path of a new layer: explicit name, or a numbered default ("conv_1").
  std::string layerPath(absl::string_view explicit_name, absl::string_view kind);
  ir::Node* emit(ir::NodeSpec spec, const std::string& path, Loc loc);
  void record(absl::Status s);
  static std::string where(Loc loc);

  ir::Module& module_;
  BuildOptions opts_;
  ir::Graph* graph_ = nullptr;
  bool training_ = true;
  std::vector<std::string> scopes_;
  absl::flat_hash_map<std::string, int> layer_counts_;  // per graph
  absl::flat_hash_map<std::string, ir::Value*> reads_;  // var -> param node, per graph
  int64_t dropouts_ = 0;  // dropouts of the graph so far: the next one's mask_id
  absl::Status status_;
};

}  // namespace tandem

#include "frontend/builder.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/op_views.h"

namespace tandem {

using ir::AttrValue;
using ir::Initializer;
using ir::Op;
using ir::TensorType;
using ir::VarRole;

const ir::Shape& Tensor::shape() const {
  static const ir::Shape kNone;
  return value_ ? value_->type().shape : kNone;
}

Builder::ScopeGuard Builder::scope(absl::string_view name) {
  scopes_.emplace_back(name);
  return ScopeGuard(*this);
}

std::string Builder::scopePath() const { return absl::StrJoin(scopes_, "."); }

std::string Builder::layerPath(absl::string_view explicit_name, absl::string_view kind) {
  std::string prefix = scopePath();
  if (!prefix.empty()) prefix.push_back('.');
  if (!explicit_name.empty()) return absl::StrCat(prefix, explicit_name);
  // Numbered per scope, and reset for every graph so that the training and evaluation
  // steps give a layer the same name (and so the same variables).
  int n = layer_counts_[absl::StrCat(prefix, kind)]++;
  return n == 0 ? absl::StrCat(prefix, kind) : absl::StrCat(prefix, kind, "_", n);
}

std::string Builder::where(Loc loc) {
  absl::string_view file = loc.file_name();
  size_t slash = file.rfind('/');
  if (slash != absl::string_view::npos) file.remove_prefix(slash + 1);
  return absl::StrCat(file, ":", loc.line());
}

void Builder::record(absl::Status s) {
  if (status_.ok() && !s.ok())
    status_ = absl::Status(s.code(), absl::StrCat("model ", module_.name(), ": ", s.message()));
}

void Builder::beginGraph(ir::Graph* g, bool training) {
  graph_ = g;
  training_ = training;
  layer_counts_.clear();
  reads_.clear();
  dropouts_ = 0;
}

Tensor Builder::addInput(absl::string_view name, TensorType type) {
  ir::NodeSpec spec =
      ir::InputArgs{}.spec({.names = {std::string(name)}, .declared_types = {type}});
  auto n = graph_->create(std::move(spec));
  if (!n.ok()) {
    record(n.status());
    return Tensor();
  }
  return Tensor((*n)->result());
}

ir::Node* Builder::emit(ir::NodeSpec spec, const std::string& path, Loc loc) {
  if (!status_.ok()) return nullptr;
  for (const ir::Value* v : spec.operands) {
    if (v == nullptr) {
      record(absl::InvalidArgumentError(absl::StrCat("layer ", path, " (", ir::opInfo(spec.op).name,
                                                     ") at ", where(loc),
                                                     " got an empty tensor handle")));
      return nullptr;
    }
  }
  spec.names = {path};
  spec.scope = path;
  spec.location = where(loc);
  auto n = graph_->create(std::move(spec));
  if (!n.ok()) {
    record(n.status());
    return nullptr;
  }
  return *n;
}

Tensor Builder::addNode(ir::NodeSpec spec, absl::string_view layer, Loc loc, size_t result) {
  ir::Node* n = emit(std::move(spec), std::string(layer), loc);
  return n ? Tensor(n->result(result)) : Tensor();
}

Tensor Builder::variable(absl::string_view name, const TensorType& type, VarRole role,
                         const Initializer& init, Loc loc) {
  if (!status_.ok()) return Tensor();
  std::string key(name);
  if (auto it = reads_.find(key); it != reads_.end()) return Tensor(it->second);
  if (const ir::Var* v = module_.findVar(key)) {
    if (v->type != type || v->role != role) {
      record(absl::InvalidArgumentError(absl::StrCat(
          "variable @", key, " at ", where(loc), " is declared as ", ir::toString(type),
          " but an earlier layer declared it as ", ir::toString(v->type))));
      return Tensor();
    }
  } else if (absl::Status s = module_.addVar(ir::Var{key, type, role, init}); !s.ok()) {
    record(s);
    return Tensor();
  }
  ir::NodeSpec spec = ir::ParamArgs{.var = key}.spec(
      {.names = {key}, .scope = scopePath(), .location = where(loc)});
  auto n = graph_->create(std::move(spec));
  if (!n.ok()) {
    record(n.status());
    return Tensor();
  }
  reads_[key] = (*n)->result();
  return Tensor((*n)->result());
}

namespace {

/// Channels of an NCHW tensor, or 0 for a poisoned or low-rank handle (the shape rule
/// then reports the real problem).
int64_t channelsOf(const Tensor& x, int axis) {
  return x.valid() && x.shape().size() > static_cast<size_t>(axis) ? x.dim(axis) : 0;
}

ir::DType dtypeOf(const Tensor& x) { return x.valid() ? x.value()->type().dtype : ir::DType::kF32; }

constexpr Initializer kZeros{Initializer::Kind::kZeros};
constexpr Initializer kOnes{Initializer::Kind::kOnes};

}  // namespace

std::vector<Tensor> Builder::weightedOperands(Tensor x, const std::string& path,
                                              absl::string_view op, absl::string_view count_name,
                                              ir::Shape weight_shape, bool bias,
                                              const std::optional<Initializer>& init, Loc loc) {
  int64_t outputs = weight_shape[0];
  if (outputs < 1) {
    record(
        absl::InvalidArgumentError(absl::StrCat("layer ", path, " (", op, ") at ", where(loc), ": ",
                                                count_name, " must be >= 1, got ", outputs)));
    return {};
  }
  ir::DType dt = dtypeOf(x);
  std::vector<Tensor> operands{x, variable(path + ".w", TensorType{dt, std::move(weight_shape)},
                                           VarRole::kParam, init.value_or(opts_.weight_init), loc)};
  if (bias)
    operands.push_back(
        variable(path + ".b", TensorType{dt, {outputs}}, VarRole::kParam, kZeros, loc));
  return operands;
}

Tensor Builder::conv2d(Tensor x, const Conv2dOptions& o, Loc loc) {
  std::string path = layerPath(o.name, "conv");
  const int64_t in = channelsOf(x, 1);
  if (o.groups < 1 || (in > 0 && in % o.groups != 0) || o.out_channels % o.groups != 0) {
    record(absl::InvalidArgumentError(absl::StrCat(
        "layer ", path, " (conv2d) at ", where(loc), ": groups must be >= 1 and divide the ", in,
        " input channels and the ", o.out_channels, " out_channels, got ", o.groups)));
    return {};
  }
  std::vector<Tensor> operands = weightedOperands(
      x, path, "conv2d", "out_channels", {o.out_channels, in / o.groups, o.kernel.h, o.kernel.w},
      o.bias, o.init, loc);
  if (operands.empty()) return Tensor();
  return addNode(ir::Conv2dArgs{.x = operands[0].value(),
                                .w = operands[1].value(),
                                .b = o.bias ? operands[2].value() : nullptr,
                                .stride = o.stride,
                                .pad = o.pad,
                                .groups = o.groups}
                     .spec(),
                 path, loc);
}

Tensor Builder::batchNorm(Tensor x, const BatchNormOptions& o, Loc loc) {
  std::string path = layerPath(o.name, "bn");
  TensorType channel{dtypeOf(x), {channelsOf(x, 1)}};
  ir::BatchNormArgs args{
      .x = x.value(),
      .gamma = variable(path + ".gamma", channel, VarRole::kParam, kOnes, loc).value(),
      .beta = variable(path + ".beta", channel, VarRole::kParam, kZeros, loc).value(),
      .running_mean =
          variable(path + ".running_mean", channel, VarRole::kBuffer, kZeros, loc).value(),
      .running_var = variable(path + ".running_var", channel, VarRole::kBuffer, kOnes, loc).value(),
      .training = training_,
      .momentum = o.momentum,
      .eps = o.eps};
  return addNode(args.spec(), path, loc);
}

Tensor Builder::layerNorm(Tensor x, const LayerNormOptions& o, Loc loc) {
  std::string path = layerPath(o.name, "ln");
  const int64_t width = x.valid() && !x.shape().empty() ? x.shape().back() : 0;
  TensorType row{ir::DType::kF32, {width}};  // f32 whatever x's dtype (mixed precision)
  ir::LayerNormArgs args{
      .x = x.value(),
      .gamma = variable(path + ".gamma", row, VarRole::kParam, kOnes, loc).value(),
      .beta = variable(path + ".beta", row, VarRole::kParam, kZeros, loc).value(),
      .eps = o.eps};
  return addNode(args.spec(), path, loc);
}

Tensor Builder::softmax(Tensor x, int64_t axis, Loc loc) {
  return addNode(ir::SoftmaxArgs{.x = x.value(), .axis = axis}.spec(), layerPath("", "softmax"),
                 loc);
}

Tensor Builder::logSoftmax(Tensor x, int64_t axis, Loc loc) {
  return addNode(ir::LogSoftmaxArgs{.x = x.value(), .axis = axis}.spec(),
                 layerPath("", "log_softmax"), loc);
}

Tensor Builder::relu(Tensor x, Loc loc) {
  return addNode(ir::ReluArgs{.x = x.value()}.spec(), layerPath("", "relu"), loc);
}

Tensor Builder::gelu(Tensor x, Gelu form, Loc loc) {
  if (form == Gelu::kTanh)
    return addNode(ir::GeluTanhArgs{.x = x.value()}.spec(), layerPath("", "gelu"), loc);
  return addNode(ir::GeluArgs{.x = x.value()}.spec(), layerPath("", "gelu"), loc);
}

Tensor Builder::tanh(Tensor x, Loc loc) {
  return addNode(ir::TanhArgs{.x = x.value()}.spec(), layerPath("", "tanh"), loc);
}

Tensor Builder::relu6(Tensor x, Loc loc) {
  return addNode(ir::Relu6Args{.x = x.value()}.spec(), layerPath("", "relu6"), loc);
}

Tensor Builder::hardswish(Tensor x, Loc loc) {
  return addNode(ir::HardswishArgs{.x = x.value()}.spec(), layerPath("", "hardswish"), loc);
}

Tensor Builder::hardsigmoid(Tensor x, Loc loc) {
  return addNode(ir::HardsigmoidArgs{.x = x.value()}.spec(), layerPath("", "hardsigmoid"), loc);
}

Tensor Builder::silu(Tensor x, Loc loc) {
  return addNode(ir::SiluArgs{.x = x.value()}.spec(), layerPath("", "silu"), loc);
}

Tensor Builder::clip(Tensor x, double lo, double hi, Loc loc) {
  return addNode(ir::ClipArgs{.x = x.value(), .min = lo, .max = hi}.spec(), layerPath("", "clip"),
                 loc);
}

Tensor Builder::pad(Tensor x, std::vector<int64_t> pads, ir::PadMode mode, double value, Loc loc) {
  return addNode(
      ir::PadArgs{.x = x.value(), .pads = std::move(pads), .mode = mode, .value = value}.spec(),
      layerPath("", "pad"), loc);
}

Tensor Builder::dropout(Tensor x, double p, Loc loc) {
  std::string path = layerPath("", "dropout");  // named in both graphs alike
  if (!training_) return x;
  Tensor step =
      variable(ir::kStepVar, TensorType{ir::DType::kI32, {1}}, VarRole::kFed, kZeros, loc);
  // Each dropout of the model its own masks: the mask_id counter word, in build order.
  return addNode(
      ir::DropoutArgs{.x = x.value(), .step = step.value(), .p = p, .mask_id = dropouts_++}.spec(),
      path, loc);
}

Tensor Builder::matmul(Tensor a, Tensor b, const MatmulOptions& o, Loc loc) {
  return addNode(
      ir::MatmulArgs{.a = a.value(), .b = b.value(), .trans_a = o.trans_a, .trans_b = o.trans_b}
          .spec(),
      layerPath("", "matmul"), loc);
}

Tensor Builder::reshape(Tensor x, std::vector<int64_t> shape, Loc loc) {
  return addNode(ir::ReshapeArgs{.x = x.value(), .shape = std::move(shape)}.spec(),
                 layerPath("", "reshape"), loc);
}

Tensor Builder::transpose(Tensor x, std::vector<int64_t> perm, Loc loc) {
  return addNode(ir::TransposeArgs{.x = x.value(), .perm = std::move(perm)}.spec(),
                 layerPath("", "transpose"), loc);
}

Tensor Builder::scale(Tensor x, double factor, Loc loc) {
  return addNode(ir::ScaleArgs{.x = x.value(), .factor = factor}.spec(), layerPath("", "scale"),
                 loc);
}

Tensor Builder::addBroadcast(Tensor a, Tensor b, Loc loc) {
  return addNode(ir::AddBcastArgs{.a = a.value(), .b = b.value()}.spec(), layerPath("", "add"),
                 loc);
}

Tensor Builder::mulBroadcast(Tensor a, Tensor b, Loc loc) {
  return addNode(ir::MulBcastArgs{.a = a.value(), .b = b.value()}.spec(), layerPath("", "mul"),
                 loc);
}

Tensor Builder::compare(Tensor a, ir::Comparison kind, Tensor b, Loc loc) {
  return addNode(ir::CompareArgs{.a = a.value(), .b = b.value(), .kind = kind}.spec(),
                 layerPath("", "compare"), loc);
}

Tensor Builder::where(Tensor cond, Tensor a, Tensor b, Loc loc) {
  return addNode(ir::WhereArgs{.cond = cond.value(), .a = a.value(), .b = b.value()}.spec(),
                 layerPath("", "where"), loc);
}

Tensor Builder::mod(Tensor a, Tensor b, bool fmod, Loc loc) {
  return addNode(ir::ModArgs{.a = a.value(), .b = b.value(), .fmod = fmod}.spec(),
                 layerPath("", "mod"), loc);
}

Tensor Builder::sum(Tensor x, int64_t axis, bool keepdim, Loc loc) {
  return addNode(ir::ReduceSumArgs{.x = x.value(), .axis = axis, .keepdim = keepdim}.spec(),
                 layerPath("", "sum"), loc);
}

Tensor Builder::mean(Tensor x, int64_t axis, bool keepdim, Loc loc) {
  return addNode(ir::ReduceMeanArgs{.x = x.value(), .axis = axis, .keepdim = keepdim}.spec(),
                 layerPath("", "mean"), loc);
}

Tensor Builder::concat(std::vector<Tensor> xs, int64_t axis, Loc loc) {
  std::vector<ir::Value*> values;
  for (const Tensor& x : xs) values.push_back(x.value());
  return addNode(ir::ConcatAxisArgs{.xs = std::move(values), .axis = axis}.spec(),
                 layerPath("", "concat"), loc);
}

Tensor Builder::slice(Tensor x, int64_t axis, int64_t start, int64_t end, Loc loc) {
  return addNode(ir::SliceAxisArgs{.x = x.value(), .axis = axis, .start = start, .end = end}.spec(),
                 layerPath("", "slice"), loc);
}

Tensor Builder::maxPool2d(Tensor x, const Pool2dOptions& o, Loc loc) {
  return addNode(ir::MaxPool2dArgs{.x = x.value(),
                                   .kernel = o.kernel,
                                   .stride = o.stride == ir::Hw(0) ? o.kernel : o.stride,
                                   .pad = o.pad,
                                   .ceil_mode = o.ceil_mode}
                     .spec(),
                 layerPath(o.name, "maxpool"), loc);
}

Tensor Builder::avgPool2d(Tensor x, const Pool2dOptions& o, Loc loc) {
  return addNode(ir::AvgPool2dArgs{.x = x.value(),
                                   .kernel = o.kernel,
                                   .stride = o.stride == ir::Hw(0) ? o.kernel : o.stride,
                                   .pad = o.pad,
                                   .ceil_mode = o.ceil_mode}
                     .spec(),
                 layerPath(o.name, "avgpool"), loc);
}

Tensor Builder::globalAvgPool(Tensor x, Loc loc) {
  return addNode(ir::GlobalAvgPoolArgs{.x = x.value()}.spec(), layerPath("", "gap"), loc);
}

Tensor Builder::flatten(Tensor x, Loc loc) {
  return addNode(ir::FlattenArgs{.x = x.value()}.spec(), layerPath("", "flatten"), loc);
}

Tensor Builder::linear(Tensor x, const LinearOptions& o, Loc loc) {
  std::string path = layerPath(o.name, "fc");
  std::vector<Tensor> operands = weightedOperands(
      x, path, "linear", "out_features", {o.out_features, channelsOf(x, 1)}, o.bias, o.init, loc);
  if (operands.empty()) return Tensor();
  return addNode(ir::LinearArgs{.x = operands[0].value(),
                                .w = operands[1].value(),
                                .b = o.bias ? operands[2].value() : nullptr}
                     .spec(),
                 path, loc);
}

Tensor Builder::embedding(Tensor ids, int64_t vocab, int64_t dim, std::string name, Loc loc) {
  std::string path = layerPath(name, "embedding");
  if (vocab < 1 || dim < 1) {
    record(absl::InvalidArgumentError(absl::StrCat("layer ", path, " (embedding) at ", where(loc),
                                                   ": vocab and dim must be >= 1, got ", vocab,
                                                   " and ", dim)));
    return Tensor();
  }
  // f32 whatever the activations' dtype: the table is the master copy (mixed precision).
  const Tensor table = variable(path + ".table", TensorType{ir::DType::kF32, {vocab, dim}},
                                VarRole::kParam, Initializer{Initializer::Kind::kNormal, 1.0}, loc);
  return addNode(ir::EmbeddingArgs{.ids = ids.value(), .table = table.value()}.spec(), path, loc);
}

Tensor Builder::embedding(Tensor ids, Tensor table, std::string name, Loc loc) {
  return addNode(ir::EmbeddingArgs{.ids = ids.value(), .table = table.value()}.spec(),
                 layerPath(name, "embedding"), loc);
}

Tensor Builder::attention(Tensor q, Tensor k, Tensor v, const AttentionOptions& o, Loc loc) {
  std::string path = layerPath(o.name, "attention");
  if (!q.valid() || !k.valid() || !v.valid()) return Tensor();
  const int64_t width = q.shape().empty() ? 0 : q.shape().back();
  if (o.heads < 1 || width % o.heads != 0 || width == 0) {
    record(absl::InvalidArgumentError(absl::StrCat("layer ", path, " (attention) at ", where(loc),
                                                   ": q's width ", width, " does not divide into ",
                                                   o.heads, " heads")));
    return Tensor();
  }
  const double scale = o.scale.value_or(1.0 / std::sqrt(static_cast<double>(width / o.heads)));
  ir::AttentionArgs args{.q = q.value(),
                         .k = k.value(),
                         .v = v.value(),
                         .heads = o.heads,
                         .scale = scale,
                         .causal = o.causal};
  if (training_ && o.dropout > 0) {
    Tensor step =
        variable(ir::kStepVar, TensorType{ir::DType::kI32, {1}}, VarRole::kFed, kZeros, loc);
    args.step = step.value();
    args.p = o.dropout;
    args.mask_id = dropouts_++;  // its own masks, numbered with the model's dropouts
  }
  return addNode(args.spec(), path, loc);
}

Tensor Builder::kvWrite(Tensor cache, Tensor x, Tensor position, Loc loc) {
  return addNode(
      ir::KvWriteArgs{.cache = cache.value(), .x = x.value(), .position = position.value()}.spec(),
      layerPath("", "kv_write"), loc);
}

Tensor Builder::cachedAttention(Tensor q, Tensor k, Tensor v, Tensor position,
                                const AttentionOptions& o, Loc loc) {
  std::string path = layerPath(o.name, "attention");
  if (!q.valid() || !k.valid() || !v.valid()) return Tensor();
  const int64_t width = q.shape().empty() ? 0 : q.shape().back();
  if (o.heads < 1 || width == 0 || width % o.heads != 0) {
    record(absl::InvalidArgumentError(absl::StrCat("layer ", path, " (attention_cached) at ",
                                                   where(loc), ": q's width ", width,
                                                   " does not divide into ", o.heads, " heads")));
    return Tensor();
  }
  return addNode(
      ir::AttentionCachedArgs{.q = q.value(),
                              .k = k.value(),
                              .v = v.value(),
                              .position = position.value(),
                              .heads = o.heads,
                              .scale = o.scale.value_or(1.0 / std::sqrt(double(width / o.heads)))}
          .spec(),
      path, loc);
}

Tensor Builder::add(Tensor a, Tensor b, Loc loc) {
  return addNode(ir::AddArgs{.a = a.value(), .b = b.value()}.spec(), layerPath("", "add"), loc);
}

}  // namespace tandem

#include "frontend/model.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/build_module.h"
#include "frontend/builder_internals.h"
#include "ir/op_views.h"

namespace tandem {

using ir::Op;
using ir::TensorType;

namespace {

/// One step graph: inputs, the network, the loss and the correct count.
absl::Status buildStep(const ModelSpec& spec, Builder& b, ir::Graph* g, bool training,
                       int64_t batch) {
  BuilderInternals::beginGraph(b, g, training);
  ir::Shape x_shape{batch};
  x_shape.insert(x_shape.end(), spec.image_shape.begin(), spec.image_shape.end());
  Tensor x = BuilderInternals::addInput(b, "x", TensorType{ir::DType::kF32, x_shape});
  Tensor y = BuilderInternals::addInput(b, "y", TensorType{ir::DType::kI32, {batch}});
  Tensor logits = spec.forward(b, x);
  if (!b.status().ok()) return b.status();
  if (!logits.valid())
    return absl::InvalidArgumentError(
        absl::StrCat("model ", spec.name, ": forward returned an empty tensor handle"));
  ir::Shape want{batch, spec.num_classes};
  if (logits.shape() != want)
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", spec.name, ": forward returns ", ir::toString(logits.value()->type()),
        " but the logits must be [", absl::StrJoin(want, ","), "] (batch, classes)"));
  // Training divides the summed loss by the global batch; the divisor stays global when
  // replicate gives each device a slice, which keeps uneven splits exact.
  Tensor loss = BuilderInternals::addNode(
      b,
      ir::SoftmaxCrossEntropyArgs{
          .logits = logits.value(),
          .labels = y.value(),
          .reduction = training ? ir::Reduction::kMean : ir::Reduction::kSum,
          .divisor = training ? batch : int64_t{1},
          .label_smoothing = training ? b.options().label_smoothing : 0.0}
          .spec(),
      "loss", std::source_location::current());
  Tensor correct = BuilderInternals::addNode(
      b, ir::AccuracyArgs{.logits = logits.value(), .labels = y.value()}.spec(), "correct",
      std::source_location::current());
  if (!b.status().ok()) return b.status();
  g->setOutputs({loss.value(), correct.value()});
  return absl::OkStatus();
}

}  // namespace

absl::Status buildInitGraph(ir::Module& m, ir::Graph& g) {
  for (const ir::Var& v : m.vars()) {
    auto value = g.create(ir::InitializeArgs{.var = v.name}.spec({.names = {v.name}}));
    if (!value.ok()) return value.status();
    auto assign = g.create(ir::AssignArgs{.value = (*value)->result(), .var = v.name}.spec());
    if (!assign.ok()) return assign.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ir::Module>> buildModule(const ModelSpec& spec,
                                                        const BuildOptions& opts) {
  // The upper bound keeps every tensor's byte count far from int64 overflow.
  if (opts.batch < 1 || opts.batch > kMaxBatch)
    return absl::InvalidArgumentError(
        absl::StrCat("batch size must be in [1, ", kMaxBatch, "], got ", opts.batch));
  // Written so that NaN fails too.
  if (!(opts.label_smoothing >= 0 && opts.label_smoothing < 1))
    return absl::InvalidArgumentError(
        absl::StrCat("label smoothing must be in [0, 1), got ", opts.label_smoothing));
  if (spec.image_shape.empty() || !spec.forward)
    return absl::InvalidArgumentError(
        absl::StrCat("model ", spec.name, " needs an image shape and a forward function"));
  auto m = std::make_unique<ir::Module>(spec.name);
  Builder b = BuilderInternals::make(*m, opts);
  auto init = m->addGraph(std::string(ir::kInitGraph));
  auto train = m->addGraph(std::string(ir::kTrainGraph));
  auto eval = m->addGraph(std::string(ir::kEvalGraph));
  if (!init.ok() || !train.ok() || !eval.ok()) return absl::InternalError("graph names clash");
  if (absl::Status s = buildStep(spec, b, *train, /*training=*/true, opts.batch); !s.ok()) return s;
  if (absl::Status s = buildStep(spec, b, *eval, /*training=*/false, opts.batch); !s.ok()) return s;
  if (absl::Status s = buildInitGraph(*m, **init); !s.ok()) return s;
  return m;
}

}  // namespace tandem

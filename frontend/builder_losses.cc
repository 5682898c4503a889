// The Builder's losses: mse_loss, l1_loss, smooth_l1_loss, bce_with_logits and
// softmax_cross_entropy nodes whose mean divides by a global count, so that the losses of
// a replicated step's devices add up to the loss of the whole batch (insert-collectives
// sums the step's outputs). The graph is built for the global batch (BuildOptions::batch),
// so the counts read off the operands' shapes here are global ones; replicate keeps the
// attribute when it gives each device its share.

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/builder.h"
#include "ir/op_views.h"

namespace tandem {

namespace {

int64_t globalElements(const Tensor& t) {
  int64_t n = 1;
  for (int64_t d : t.shape()) n *= d;
  return n;
}

/// What a mean divides by (the global count of elements or targets, at least 1) and a sum
/// by (1).
int64_t lossDivisor(ir::Reduction r, int64_t count) {
  return r == ir::Reduction::kMean ? std::max<int64_t>(count, 1) : 1;
}

}  // namespace

Tensor Builder::mseLoss(Tensor x, Tensor target, const LossOptions& o, Loc loc) {
  return addNode(ir::MseLossArgs{.x = x.value(),
                                 .target = target.value(),
                                 .reduction = o.reduction,
                                 .divisor = lossDivisor(o.reduction, globalElements(x))}
                     .spec(),
                 layerPath(o.name, "loss"), loc);
}

Tensor Builder::l1Loss(Tensor x, Tensor target, const LossOptions& o, Loc loc) {
  return addNode(ir::L1LossArgs{.x = x.value(),
                                .target = target.value(),
                                .reduction = o.reduction,
                                .divisor = lossDivisor(o.reduction, globalElements(x))}
                     .spec(),
                 layerPath(o.name, "loss"), loc);
}

Tensor Builder::smoothL1Loss(Tensor x, Tensor target, double beta, const LossOptions& o, Loc loc) {
  return addNode(ir::SmoothL1LossArgs{.x = x.value(),
                                      .target = target.value(),
                                      .reduction = o.reduction,
                                      .divisor = lossDivisor(o.reduction, globalElements(x)),
                                      .beta = beta}
                     .spec(),
                 layerPath(o.name, "loss"), loc);
}

Tensor Builder::bceWithLogits(Tensor x, Tensor target, Tensor pos_weight, const LossOptions& o,
                              Loc loc) {
  return addNode(ir::BceWithLogitsArgs{.x = x.value(),
                                       .target = target.value(),
                                       .pos_weight = pos_weight.value(),
                                       .reduction = o.reduction,
                                       .divisor = lossDivisor(o.reduction, globalElements(x))}
                     .spec(),
                 layerPath(o.name, "loss"), loc);
}

Tensor Builder::crossEntropy(Tensor logits, Tensor labels, const CrossEntropyOptions& o, Loc loc) {
  const std::string path = layerPath(o.name, "loss");
  if (!status_.ok()) return Tensor();
  const auto rank = static_cast<int64_t>(logits.shape().size());
  const int64_t axis = o.axis < 0 ? o.axis + rank : o.axis;
  auto refuse = [&](const std::string& why) {
    record(absl::InvalidArgumentError(
        absl::StrCat("layer ", path, " (softmax_cross_entropy) at ", where(loc), ": ", why)));
    return Tensor();
  };
  if (logits.valid() && (axis < 1 || axis >= rank))
    return refuse(absl::StrCat("axis ", o.axis, " is not a class axis of the logits ",
                               ir::toString(logits.value()->type()),
                               " (1 to rank - 1, or negative from the end; 0 is the batch)"));
  if (!(o.label_smoothing >= 0 && o.label_smoothing < 1))
    return refuse(absl::StrCat("label_smoothing must be in [0, 1), got ", o.label_smoothing));
  if (!o.class_weights.empty() && o.weight.valid())
    return refuse("give the class weights as values or as a tensor, not both");
  Tensor weight = o.weight;
  if (!o.class_weights.empty()) {
    // One constant per run of equal weights, joined: a few nodes for the usual weights
    // (a rare class up-weighted), values exactly the given floats.
    std::vector<Tensor> runs;
    for (size_t i = 0; i < o.class_weights.size();) {
      size_t j = i;
      while (j < o.class_weights.size() && o.class_weights[j] == o.class_weights[i]) ++j;
      const auto len = static_cast<int64_t>(j - i);
      runs.push_back(addNode(ir::ConstantArgs{.value = o.class_weights[i]}.spec(
                                 {.declared_types = {ir::TensorType{ir::DType::kF32, {len}}}}),
                             path + ".weight", loc));
      i = j;
    }
    weight = runs.size() == 1 ? runs[0] : concat(std::move(runs), 0, loc);
    if (!status_.ok()) return Tensor();
  }
  // A data-dependent count: the global sum of the counted targets' weights, summed over
  // the devices before the loss reads it (device_sum), replaces the divisor.
  const bool global_total =
      o.reduction == ir::Reduction::kMean && (o.ignore_index.has_value() || weight.valid());
  const int64_t ignore = o.ignore_index.value_or(-100);
  Tensor total;
  if (global_total) {
    total = addNode(
        ir::TargetWeightSumArgs{
            .labels = labels.value(), .weight = weight.value(), .ignore_index = ignore}
            .spec(),
        path + ".total", loc);
    if (!total.valid()) return Tensor();
  }
  return addNode(
      ir::SoftmaxCrossEntropyArgs{
          .logits = logits.value(),
          .labels = labels.value(),
          .weight = weight.value(),
          .total = total.value(),
          .reduction = o.reduction,
          .divisor = global_total ? 1 : lossDivisor(o.reduction, globalElements(labels)),
          .label_smoothing = o.label_smoothing,
          .axis = axis,
          .ignore_index = ignore,
          .weighted = weight.valid()}
          .spec(),
      path, loc);
}

}  // namespace tandem

#pragma once

// Labels are checked once, on the host, as each batch is handed over: a label past the
// last class would make a loss kernel read past its row of logits (the CPU kernel only
// asserts it; the CUDA one turned it into a NaN loss far from its cause). The data
// loaders check the labels they read against the data set's classes; this checks every
// batch against what the model was compiled for, whoever made the batch.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "backend/tensor_view.h"
#include "ir/ir.h"

namespace tandem::runtime {

/// A graph input whose values are the labels of a loss: `input` is its position among the
/// graph's inputs, `classes` the logits' class count every label must stay below (a
/// negative label is padding), `loss` the first loss-family node that reads it.
struct LabelCheck {
  size_t input = 0;
  int64_t classes = 0;
  const ir::Node* loss = nullptr;
};

/// The label inputs of `g`: inputs split onto the devices whose slices feed operand 1 (the
/// labels) of softmax_cross_entropy, its backward or accuracy.
std::vector<LabelCheck> labelChecks(const ir::Graph& g);

/// OK when every label in `labels` (i32, on the host) is below `check.classes`; else an
/// error naming the graph input, the first sample at fault, its label and the loss node.
absl::Status checkLabels(const LabelCheck& check, const ir::Graph& g,
                         const backend::TensorView& labels);

}  // namespace tandem::runtime

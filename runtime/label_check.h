#pragma once

// Integer inputs are checked once, on the host, as each batch is handed over: a label
// past the last class would make a loss kernel read past its row of logits (the CPU
// kernel only asserted it; the CUDA one turned it into a NaN loss far from its cause),
// and an embedding id outside its table would read past the table (the CUDA kernel
// writes a NaN row instead, far from its cause). The data loaders check the labels they
// read against the data set's classes; this checks every batch against what the module
// was compiled for, whoever made the batch.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "backend/tensor_view.h"
#include "ir/ir.h"

namespace tandem::runtime {

/// A graph input whose values index something: the labels of a loss (`classes` the
/// logits' class count every label must stay below; a negative label is padding) or the
/// ids of an embedding (`classes` the table's rows; a negative id is an error too).
/// `input` is its position among the graph's inputs, `loss` the reader named in errors:
/// the first loss-family node, or embedding node, that reads it.
struct LabelCheck {
  enum class Kind { kLabels, kEmbeddingIds };
  size_t input = 0;
  int64_t classes = 0;
  const ir::Node* loss = nullptr;
  Kind kind = Kind::kLabels;
};

/// The index inputs of `g`: inputs split onto the devices whose slices feed operand 1
/// (the labels) of softmax_cross_entropy, its backward or accuracy, or operand 0 (the
/// ids) of embedding; an i64 input feeds them through its cast to i32. An input read both
/// ways gets a check of each kind.
std::vector<LabelCheck> labelChecks(const ir::Graph& g);

/// OK when every value in `labels` (i32 or i64, on the host) is within what `check` allows
/// (an i64 value within i32 too, so that the cast never saturates one); else an error
/// naming the graph input, the first element at fault, its value and the reader.
absl::Status checkLabels(const LabelCheck& check, const ir::Graph& g,
                         const backend::TensorView& labels);

}  // namespace tandem::runtime

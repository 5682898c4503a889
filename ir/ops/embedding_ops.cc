// embedding (nn.Embedding's lookup) and its backward op, the table's gradient.

#include <cstdint>

#include "ir/grad.h"
#include "ir/op_views.h"
#include "ir/ops/rule_util.h"
#include "ir/status_macros.h"

namespace tandem::ir {
namespace {
using namespace rules;

/// ids i32[...] and table f32[V, D] -> y f32[..., D]. The table stays f32 under mixed
/// precision (a variable, the master copy), and so does y: PyTorch's autocast leaves
/// embedding out of its lower-precision list, and a bf16 lookup would round the rows that
/// the first low-precision reader rounds anyway.
absl::StatusOr<Types> inferEmbedding(const Node& n) {
  RETURN_IF_ERROR(expectRank(n, 1, 2, "vocab, dim"));
  const TensorType& table = typeOf(n, 1);
  if (table.shape[0] < 1 || table.shape[1] < 1)
    return fail(absl::StrCat(describeOperand(n, 1), " must have at least one row and column"));
  Shape y = typeOf(n, 0).shape;
  y.push_back(table.shape[1]);
  return Types{TensorType{DType::kF32, y}};
}

/// dy f32|bf16[ids..., D] and ids i32[...] -> dtable f32[vocab, D]: the sums are f32
/// whatever dy's dtype, as the table they update is.
absl::StatusOr<Types> inferEmbeddingBackward(const Node& n) {
  const TensorType &dy = typeOf(n, 0), &ids = typeOf(n, 1);
  Shape want = ids.shape;
  if (dy.rank() == ids.rank() + 1) want.push_back(dy.shape.back());
  if (dy.rank() != ids.rank() + 1 || dy.shape != want || dy.shape.back() < 1)
    return fail(absl::StrCat(describeOperand(n, 0), " must be [ids..., dim]: one row per id of ",
                             describeOperand(n, 1)));
  return Types{TensorType{DType::kF32, {EmbeddingBackwardView(n).vocab(), dy.shape.back()}}};
}

/// The table's gradient only: ids are integers.
absl::Status gradEmbedding(GradContext& c) {
  const EmbeddingView v(c.node());
  if (!c.needsGrad(1)) return absl::OkStatus();
  ASSIGN_OR_RETURN(Node * back,
                   c.emit(EmbeddingBackwardArgs{
                       .dy = c.resultGrad(0), .ids = v.ids(), .vocab = v.table()->type().shape[0]}
                              .spec({.names = {gradName(v.table())}})));
  c.addOperandGrad(1, back->result());
  return absl::OkStatus();
}

}  // namespace

extern const OpRules kEmbeddingRules{.infer = inferEmbedding, .grad = gradEmbedding};
extern const OpRules kEmbeddingBackwardRules{.infer = inferEmbeddingBackward};

}  // namespace tandem::ir

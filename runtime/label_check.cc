#include "runtime/label_check.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ir/op_views.h"

namespace tandem::runtime {
namespace {

bool readsLabels(const ir::Node& n) {
  return n.op() == ir::Op::kSoftmaxCrossEntropy || n.op() == ir::Op::kSoftmaxCrossEntropyBackward ||
         n.op() == ir::Op::kAccuracy;
}

/// What reader `u` allows of `v`, if it reads it as indices: the count they stay below.
std::optional<std::pair<LabelCheck::Kind, int64_t>> indexLimit(const ir::Node& u,
                                                               const ir::Value* v) {
  if (readsLabels(u) && u.numOperands() > 1 && u.operand(1) == v) {
    const ir::TensorType& logits = u.operand(0)->type();
    // The cross-entropy's classes are on its `axis` (accuracy's on 1, of [N, C]).
    const bool ce = u.op() != ir::Op::kAccuracy;
    const auto axis = static_cast<size_t>(ce ? ir::attr::axis(u) : 1);
    if (axis >= logits.shape.size() || (!ce && logits.shape.size() != 2)) return std::nullopt;
    // An ignore_index past the classes is a label the loss skips: no limit to check.
    if (ce && ir::attr::ignore_index(u) >= logits.shape[axis]) return std::nullopt;
    return std::pair{LabelCheck::Kind::kLabels, logits.shape[axis]};
  }
  if (ir::EmbeddingView::is(u) && u.operand(0) == v) {
    const ir::TensorType& table = ir::EmbeddingView(u).table()->type();
    if (table.shape.size() != 2) return std::nullopt;
    return std::pair{LabelCheck::Kind::kEmbeddingIds, table.shape[0]};
  }
  return std::nullopt;
}

}  // namespace

std::vector<LabelCheck> labelChecks(const ir::Graph& g) {
  const auto users = g.users();
  auto usersOf = [&](const ir::Value* v) {
    auto it = users.find(v);
    return it == users.end() ? std::vector<ir::Node*>{} : it->second;
  };
  std::vector<LabelCheck> out;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const ir::Value* input = g.inputs()[i]->result();
    const ir::DType dtype = input->type().dtype;
    if (dtype != ir::DType::kI32 && dtype != ir::DType::kI64) continue;
    LabelCheck checks[] = {{.input = i, .kind = LabelCheck::Kind::kLabels},
                           {.input = i, .kind = LabelCheck::Kind::kEmbeddingIds}};
    // The input itself (an unreplicated graph) or the slices a split made of it.
    std::vector<const ir::Value*> reaching = {input};
    for (const ir::Node* u : usersOf(input))
      if (u->op() == ir::Op::kSplit)
        for (size_t r = 0; r < u->numResults(); ++r) reaching.push_back(u->result(r));
    // An i64 input reaches the index ops through its cast to i32 (frontend/model.cc).
    if (dtype == ir::DType::kI64)
      for (size_t k = 0, n = reaching.size(); k < n; ++k)
        for (const ir::Node* u : usersOf(reaching[k]))
          if (u->op() == ir::Op::kCast && u->result()->type().dtype == ir::DType::kI32)
            reaching.push_back(u->result());
    for (const ir::Value* v : reaching)
      for (const ir::Node* u : usersOf(v)) {
        const auto limit = indexLimit(*u, v);
        if (!limit) continue;
        LabelCheck& check = checks[limit->first == LabelCheck::Kind::kLabels ? 0 : 1];
        if (check.loss == nullptr || limit->second < check.classes) {
          check.classes = limit->second;
          check.loss = u;
        }
      }
    for (const LabelCheck& check : checks)
      if (check.loss != nullptr) out.push_back(check);
  }
  return out;
}

namespace {

// The first element of `l` that `check` refuses, or l + n. An i64 value must fit i32 too:
// the cast to i32 would saturate it (a label far below zero would pass as padding).
template <typename T>
const T* firstBadIndex(const LabelCheck& check, const T* l, int64_t n) {
  const bool ids = check.kind == LabelCheck::Kind::kEmbeddingIds;
  return std::find_if(l, l + n, [&](T v) {
    return v >= check.classes || (ids && v < 0) || v < std::numeric_limits<int32_t>::min();
  });
}

}  // namespace

absl::Status checkLabels(const LabelCheck& check, const ir::Graph& g,
                         const backend::TensorView& labels) {
  const int64_t n = labels.numElements();
  int64_t at = n, value = 0;
  if (labels.type.dtype == ir::DType::kI64) {
    const int64_t* l = labels.as<int64_t>();
    const int64_t* bad = firstBadIndex(check, l, n);
    if (bad != l + n) at = bad - l, value = *bad;
  } else {
    const int32_t* l = labels.i32();
    const int32_t* bad = firstBadIndex(check, l, n);
    if (bad != l + n) at = bad - l, value = *bad;
  }
  if (at == n) return absl::OkStatus();
  const std::string input =
      absl::StrCat("@", g.name(), " input %", g.inputs()[check.input]->result()->name(), ": ");
  if (check.kind == LabelCheck::Kind::kEmbeddingIds)
    return absl::InvalidArgumentError(absl::StrCat(
        input, "element ", at, " of the batch is id ", value, ", but ", check.loss->describe(),
        " looks ids up in a table of ", check.classes, " rows (ids 0 to ", check.classes - 1, ")"));
  return absl::InvalidArgumentError(
      absl::StrCat(input, "sample ", at, " of the batch has label ", value, ", but ",
                   check.loss->describe(), " has ", check.classes, " classes (labels 0 to ",
                   check.classes - 1, "; a negative label is padding)"));
}

}  // namespace tandem::runtime

#include "runtime/label_check.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tandem::runtime {
namespace {

bool readsLabels(const ir::Node& n) {
  return n.op() == ir::Op::kSoftmaxCrossEntropy || n.op() == ir::Op::kSoftmaxCrossEntropyBackward ||
         n.op() == ir::Op::kAccuracy;
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
    if (input->type().dtype != ir::DType::kI32) continue;
    LabelCheck check{.input = i};
    // The input itself (an unreplicated graph) or the slices a split made of it.
    std::vector<const ir::Value*> reaching = {input};
    for (const ir::Node* u : usersOf(input))
      if (u->op() == ir::Op::kSplit)
        for (size_t r = 0; r < u->numResults(); ++r) reaching.push_back(u->result(r));
    for (const ir::Value* v : reaching)
      for (const ir::Node* u : usersOf(v))
        if (readsLabels(*u) && u->numOperands() > 1 && u->operand(1) == v) {
          const ir::TensorType& logits = u->operand(0)->type();
          if (logits.shape.size() != 2) continue;
          if (check.loss == nullptr || logits.shape[1] < check.classes) {
            check.classes = logits.shape[1];
            check.loss = u;
          }
        }
    if (check.loss != nullptr) out.push_back(check);
  }
  return out;
}

absl::Status checkLabels(const LabelCheck& check, const ir::Graph& g,
                         const backend::TensorView& labels) {
  const int32_t* l = labels.i32();
  const int64_t n = labels.numElements();
  const int32_t* bad =
      std::find_if(l, l + n, [&](int32_t label) { return label >= check.classes; });
  if (bad == l + n) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "@", g.name(), " input %", g.inputs()[check.input]->result()->name(), ": sample ", bad - l,
      " of the batch has label ", *bad, ", but ", check.loss->describe(), " has ", check.classes,
      " classes (labels 0 to ", check.classes - 1, "; a negative label is padding)"));
}

}  // namespace tandem::runtime

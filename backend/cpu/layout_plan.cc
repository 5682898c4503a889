#include "backend/cpu/layout_plan.h"

#include <numeric>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace tandem::backend::cpu {
namespace {

using ir::Op;

/// Union-find over value indices, with a "must stay plain" mark per group.
class Groups {
 public:
  explicit Groups(size_t n) : parent_(n), plain_(n, false) {
    std::iota(parent_.begin(), parent_.end(), 0);
  }
  size_t find(size_t i) {
    while (parent_[i] != i) i = parent_[i] = parent_[parent_[i]];
    return i;
  }
  void join(size_t a, size_t b) {
    a = find(a), b = find(b);
    if (a == b) return;
    parent_[b] = a;
    plain_[a] = plain_[a] || plain_[b];
  }
  void markPlain(size_t i) { plain_[find(i)] = true; }
  bool plain(size_t i) { return plain_[find(i)]; }

 private:
  std::vector<size_t> parent_;
  std::vector<bool> plain_;
};

bool fourD(const ir::Value* v) { return v->type().shape.size() == 4; }

/// The operand slots of a convolution-family node that hold activations (either layout);
/// its other operands and results are filters, biases and statistics (plain).
bool convActivationOperand(Op op, size_t i) {
  switch (op) {
    case Op::kConv2d:
    case Op::kConv2dStats:
      return i == 0;  // x (w, b are filters)
    case Op::kConv2dBackwardData:
      return i == 0 || i == 2;  // dy, x (x gives only the shape)
    case Op::kConv2dBackwardFilter:
      return i == 0 || i == 1;  // dy, x
    default:
      return false;
  }
}
bool convActivationResult(Op op, size_t i) {
  switch (op) {
    case Op::kConv2d:
    case Op::kConv2dStats:
    case Op::kConv2dBackwardData:
      return i == 0;  // y, dx (conv2d_stats' statistics are f64)
    default:
      return false;  // conv2d_backward_filter: dw, db
  }
}

/// Ops whose 4-D operands and results all share one layout and whose loops take both.
bool sameLayoutFamily(Op op) {
  switch (op) {
    case Op::kBatchNormApply:
    case Op::kBatchNormRecompute:
    case Op::kBatchNormBackwardReduce:
    case Op::kBatchNormBackwardApply:
    case Op::kAdd:
      return true;
    default:
      return false;
  }
}

}  // namespace

absl::flat_hash_set<const ir::Value*> channelBlockedValues(const ir::Graph& g) {
  absl::flat_hash_map<const ir::Value*, size_t> index;
  std::vector<const ir::Value*> values;
  for (const auto& n : g.nodes())
    for (size_t i = 0; i < n->numResults(); ++i) {
      index.emplace(n->result(i), values.size());
      values.push_back(n->result(i));
    }
  Groups groups(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const ir::TensorType& t = values[i]->type();
    const ir::Op def = values[i]->def()->op();
    const bool floating = t.dtype == ir::DType::kF32 || t.dtype == ir::DType::kBF16;
    if (!floating || t.shape.size() != 4 || t.shape[1] % kChannelBlock != 0 ||
        def == Op::kInput || def == Op::kParam)
      groups.markPlain(i);
  }
  for (const ir::Value* v : g.outputs())
    if (auto it = index.find(v); it != index.end()) groups.markPlain(it->second);
  for (const auto& n : g.nodes()) {
    const Op op = n->op();
    if (sameLayoutFamily(op)) {
      // One layout for every 4-D tensor of the node (per-channel vectors and f64
      // statistics are not 4-D and stay plain by the rule above).
      std::optional<size_t> first;
      auto link = [&](const ir::Value* v) {
        if (!fourD(v)) return;
        size_t i = index.at(v);
        if (first)
          groups.join(*first, i);
        else
          first = i;
      };
      for (const ir::Value* v : n->operands()) link(v);
      for (size_t r = 0; r < n->numResults(); ++r) link(n->result(r));
      continue;
    }
    // Convolutions take either layout in their activation slots; every other slot, and
    // every other op, wants plain tensors.
    for (size_t i = 0; i < n->numOperands(); ++i)
      if (!convActivationOperand(op, i)) groups.markPlain(index.at(n->operand(i)));
    for (size_t r = 0; r < n->numResults(); ++r)
      if (!convActivationResult(op, r)) groups.markPlain(index.at(n->result(r)));
  }
  absl::flat_hash_set<const ir::Value*> blocked;
  for (size_t i = 0; i < values.size(); ++i)
    if (!groups.plain(i)) blocked.insert(values[i]);
  return blocked;
}

}  // namespace tandem::backend::cpu

#include "backend/activation_layout.h"

#include <numeric>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace tandem::backend {
namespace {

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

}  // namespace

absl::flat_hash_set<const ir::Value*> alternativeLayoutValues(const ir::Graph& g,
                                                              const LayoutRules& rules) {
  absl::flat_hash_map<const ir::Value*, size_t> index;
  std::vector<const ir::Value*> values;
  for (const auto& n : g.nodes())
    for (size_t i = 0; i < n->numResults(); ++i) {
      index.emplace(n->result(i), values.size());
      values.push_back(n->result(i));
    }
  Groups groups(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const ir::Op def = values[i]->def()->op();
    if (!fourD(values[i]) || !rules.eligible(*values[i]) || def == ir::Op::kInput ||
        def == ir::Op::kParam)
      groups.markPlain(i);
  }
  for (const ir::Value* v : g.outputs())
    if (auto it = index.find(v); it != index.end()) groups.markPlain(it->second);
  for (const auto& n : g.nodes()) {
    // The first 4-D value of each link of this node; later ones join it.
    absl::flat_hash_map<int, size_t> first;
    auto visit = [&](const ir::Value* v, bool result, size_t slot) {
      const size_t i = index.at(v);
      const std::optional<int> link = rules.slot(n->op(), result, slot);
      if (!link) {
        groups.markPlain(i);
        return;
      }
      if (!fourD(v)) return;  // plain by the rule above, and it binds no other slot
      auto [it, inserted] = first.emplace(*link, i);
      if (!inserted) groups.join(it->second, i);
    };
    for (size_t i = 0; i < n->numOperands(); ++i) visit(n->operand(i), false, i);
    for (size_t r = 0; r < n->numResults(); ++r) visit(n->result(r), true, r);
  }
  absl::flat_hash_set<const ir::Value*> kept;
  for (size_t i = 0; i < values.size(); ++i)
    if (!groups.plain(i)) kept.insert(values[i]);
  return kept;
}

}  // namespace tandem::backend

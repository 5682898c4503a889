#pragma once

// Who reads each value of a graph, as the fusion passes ask it while they match chains
// (fuse-conv-bn-relu, fuse-relu-pool): computed once per graph before any rewrite.

#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "ir/ir.h"

namespace tandem::passes {

class ValueUsers {
 public:
  explicit ValueUsers(const ir::Graph& g) : g_(g), users_(g.users()) {}

  /// The nodes that read `v`.
  const std::vector<ir::Node*>& of(const ir::Value* v) const {
    static const std::vector<ir::Node*> kNone;
    auto it = users_.find(v);
    return it == users_.end() ? kNone : it->second;
  }
  /// Whether the graph returns `v`.
  bool returned(const ir::Value* v) const {
    return std::find(g_.outputs().begin(), g_.outputs().end(), v) != g_.outputs().end();
  }
  /// The one node that reads `v`, or null when several or none do or the graph returns it.
  ir::Node* only(const ir::Value* v) const {
    const auto& u = of(v);
    return u.size() == 1 && !returned(v) ? u[0] : nullptr;
  }

 private:
  const ir::Graph& g_;
  absl::flat_hash_map<const ir::Value*, std::vector<ir::Node*>> users_;
};

}  // namespace tandem::passes

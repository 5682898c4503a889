#pragma once

// What the fusion passes (fuse-conv-bn-relu, fuse-conv-relu-pool) share to replace chains
// of nodes by fused ones: new nodes created while the chains are matched and placed at
// their anchors by one rebuild of the node list, every use of a replaced value redirected
// by one sweep, the absorbed nodes erased.

#include <algorithm>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ir/ir.h"
#include "passes/insertions.h"

namespace tandem::passes {

class FusionRewrite {
 public:
  explicit FusionRewrite(ir::Graph& g) : g_(g), pos_(g.positions()), insert_(g) {}

  /// Creates a node (appended for now) on `anchor`'s device, to be placed just before it.
  absl::StatusOr<ir::Node*> add(const ir::Node& anchor, ir::NodeSpec spec, std::string scope,
                                std::string location) {
    spec.device = anchor.device();
    spec.scope = std::move(scope);
    spec.location = std::move(location);
    // Anchors are never the first node (inputs come first): right after the one before.
    return insert_.add(pos_.at(&anchor) - 1, std::move(spec));
  }

  /// Frees `v`'s name for the node that replaces its definition ("NAME.unfused" until the
  /// old node is erased).
  std::string takeName(ir::Value* v) {
    std::string name = v->name();
    g_.rename(v, name + ".unfused");
    return name;
  }

  /// Every use of `from` reads `to` once applied (a chain of replacements resolves to its
  /// end).
  void replace(ir::Value* from, ir::Value* to) { replace_[from] = to; }

  /// The nodes (null ones skipped) are erased once applied.
  void absorb(std::initializer_list<const ir::Node*> nodes) {
    for (const ir::Node* n : nodes)
      if (n != nullptr) absorbed_.insert(n->id());
  }

  /// Places the new nodes, redirects every use of a replaced value (the graph's outputs
  /// too), drops what was absorbed.
  void apply() {
    insert_.apply();
    auto resolve = [&](ir::Value* v) {
      for (auto it = replace_.find(v); it != replace_.end(); it = replace_.find(v)) v = it->second;
      return v;
    };
    for (const auto& n : g_.nodes())
      for (size_t i = 0; i < n->numOperands(); ++i) n->setOperand(i, resolve(n->operand(i)));
    std::vector<ir::Value*> outputs = g_.outputs();
    for (ir::Value*& v : outputs) v = resolve(v);
    g_.setOutputs(std::move(outputs));
    g_.eraseIf([&](const ir::Node& n) { return absorbed_.contains(n.id()); });
  }

  /// "conv1 + pool1 + relu": the nodes' scopes (null nodes skipped), each once in order,
  /// an earlier fusion's joined scope taken apart: the first names the layer in views
  /// (ir/dot_views.h).
  static std::string joinedScopes(std::initializer_list<const ir::Node*> nodes) {
    std::vector<std::string> scopes;
    for (const ir::Node* n : nodes) {
      if (n == nullptr) continue;
      for (absl::string_view s : absl::StrSplit(n->scope(), " + ", absl::SkipEmpty()))
        if (std::find(scopes.begin(), scopes.end(), s) == scopes.end()) scopes.emplace_back(s);
    }
    return absl::StrJoin(scopes, " + ");
  }

 private:
  ir::Graph& g_;
  ir::Graph::Positions pos_;  // of the original nodes, where the new ones are anchored
  Insertions insert_;
  absl::flat_hash_map<ir::Value*, ir::Value*> replace_;
  absl::flat_hash_set<uint32_t> absorbed_;
};

}  // namespace tandem::passes

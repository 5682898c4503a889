#pragma once

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.h"

namespace tandem::passes {

/// Nodes to add at given positions, spliced in by one linear rebuild. Graph::create
/// appends, so the pending nodes are the ones past the original end, in creation order.
class Insertions {
 public:
  explicit Insertions(ir::Graph& g) : g_(g), base_(g.numNodes()) {}
  /// Creates a node (at the end, temporarily) to be moved after position `after` of the
  /// original node list.
  absl::StatusOr<ir::Node*> add(size_t after, ir::NodeSpec spec) {
    auto n = g_.create(std::move(spec));
    if (n.ok()) pending_.push_back({after, pending_.size()});
    return n;
  }
  void apply() {
    if (pending_.empty()) return;
    std::stable_sort(pending_.begin(), pending_.end(),
                     [](const Pending& a, const Pending& b) { return a.after < b.after; });
    std::vector<std::unique_ptr<ir::Node>> old = g_.takeNodes();
    std::vector<std::unique_ptr<ir::Node>> out;
    out.reserve(old.size());
    size_t k = 0;
    for (size_t i = 0; i < base_; ++i) {
      out.push_back(std::move(old[i]));
      for (; k < pending_.size() && pending_[k].after == i; ++k)
        out.push_back(std::move(old[base_ + pending_[k].order]));
    }
    for (; k < pending_.size(); ++k) out.push_back(std::move(old[base_ + pending_[k].order]));
    g_.setNodes(std::move(out));
    pending_.clear();
    base_ = g_.numNodes();
  }

 private:
  struct Pending {
    size_t after;  // position in the original list
    size_t order;  // creation order
  };
  ir::Graph& g_;
  size_t base_;
  std::vector<Pending> pending_;
};

}  // namespace tandem::passes

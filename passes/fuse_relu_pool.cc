#include "passes/fuse_relu_pool.h"

#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"
#include "passes/fusion_rewrite.h"
#include "passes/value_users.h"

namespace tandem::passes {
namespace {

using ir::Node;
using ir::Value;

/// One relu -> avg_pool2d and, in a training step, the backward pair it owns.
struct ReluPoolChain {
  Node* relu;
  Node* pool;
  Node* pool_backward = nullptr;  // avg_pool2d_backward(dp, relu's output)
  Node* relu_backward = nullptr;  // relu_backward(pool_backward's dx, relu's output)
};

class ReluPoolRewriter {
 public:
  explicit ReluPoolRewriter(ir::Graph& g) : g_(g), users_(g) {}

  bool run() {
    std::vector<ReluPoolChain> chains;
    for (const auto& n : g_.nodes())
      if (ir::ReluView::is(*n))
        if (std::optional<ReluPoolChain> c = match(*n)) chains.push_back(*c);
    for (const ReluPoolChain& c : chains) fuse(c);
    if (chains.empty()) return false;
    g_.eraseIf([&](const Node& n) { return erased_.contains(n.id()); });
    return true;
  }

 private:
  /// relu's output read by exactly one plain avg_pool2d and, in a training step, by that
  /// pool's backward (for its shape) and relu's backward of the pool's gradient: nothing
  /// else, so that it need not exist.
  std::optional<ReluPoolChain> match(Node& relu) const {
    const Value* r = relu.result();
    if (users_.returned(r)) return std::nullopt;
    ReluPoolChain c{.relu = &relu, .pool = nullptr};
    for (Node* u : users_.of(r)) {
      if (ir::AvgPool2dView::is(*u) && c.pool == nullptr && !ir::AvgPool2dView(*u).relu()) {
        c.pool = u;
      } else if (ir::AvgPool2dBackwardView::is(*u) && c.pool_backward == nullptr &&
                 ir::AvgPool2dBackwardView(*u).x() == r &&
                 ir::AvgPool2dBackwardView(*u).dy() != r && !ir::AvgPool2dBackwardView(*u).relu()) {
        c.pool_backward = u;
      } else if (ir::ReluBackwardView::is(*u) && c.relu_backward == nullptr &&
                 ir::ReluBackwardView(*u).y() == r) {
        c.relu_backward = u;
      } else {
        return std::nullopt;
      }
    }
    if (c.pool == nullptr || (c.pool_backward == nullptr) != (c.relu_backward == nullptr))
      return std::nullopt;
    if (c.pool_backward != nullptr) {
      // relu's backward must read the pool's gradient, and be its only reader, with the
      // pool's window.
      const Value* dx = c.pool_backward->result();
      if (ir::ReluBackwardView(*c.relu_backward).dy() != dx || users_.of(dx).size() != 1 ||
          users_.returned(dx) || c.pool_backward->attrs() != c.pool->attrs())
        return std::nullopt;
    }
    return c;
  }

  void fuse(const ReluPoolChain& c) {
    Value* x = ir::ReluView(*c.relu).x();
    c.pool->setOperand(0, x);
    c.pool->setAttr("relu", true);
    c.pool->setScope(FusionRewrite::joinedScopes({c.pool, c.relu}));
    erased_.insert(c.relu->id());
    if (c.pool_backward == nullptr) return;
    c.pool_backward->setOperand(1, x);
    c.pool_backward->setAttr("relu", true);
    c.pool_backward->setScope(FusionRewrite::joinedScopes({c.pool_backward, c.relu_backward}));
    // The fused gradient takes relu's backward's place and name.
    Value* old = c.relu_backward->result();
    Value* fused = c.pool_backward->result();
    const std::string name = old->name();
    g_.rename(old, name + ".unfused");
    g_.rename(fused, name);
    for (Node* u : users_.of(old))
      for (size_t i = 0; i < u->numOperands(); ++i)
        if (u->operand(i) == old) u->setOperand(i, fused);
    if (users_.returned(old)) {
      std::vector<Value*> outputs = g_.outputs();
      std::replace(outputs.begin(), outputs.end(), old, fused);
      g_.setOutputs(std::move(outputs));
    }
    erased_.insert(c.relu_backward->id());
  }

  ir::Graph& g_;
  ValueUsers users_;
  absl::flat_hash_set<uint32_t> erased_;
};

}  // namespace

absl::StatusOr<bool> FuseReluPool::run(ir::Module& m) {
  if (m.isReplicated())
    return absl::FailedPreconditionError(
        "fuse-relu-pool: the module is already replicated (run it before replicate)");
  bool changed = false;
  for (const auto& g : m.graphs()) changed = ReluPoolRewriter(*g).run() || changed;
  return changed;
}

absl::StatusOr<std::unique_ptr<Pass>> FuseReluPool::create(PassOptions& opts) {
  RETURN_IF_ERROR(opts.finish());
  return std::unique_ptr<Pass>(new FuseReluPool());
}

}  // namespace tandem::passes

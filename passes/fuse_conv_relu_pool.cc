#include "passes/fuse_conv_relu_pool.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "ir/op_views.h"
#include "ir/status_macros.h"
#include "passes/fusion_rewrite.h"
#include "passes/value_users.h"

namespace tandem::passes {
namespace {

using ir::Node;
using ir::Value;

/// One conv2d -> avg_pool2d{relu} and, in a training step, the backward pair it owns.
struct ConvPoolChain {
  Node* conv;
  Node* pool;
  Node* pool_backward = nullptr;  // avg_pool2d_backward{relu}(dp, conv's output)
  Node* filter = nullptr;         // conv2d_backward_filter(pool_backward's dx, x, w)
};

class ConvPoolRewriter {
 public:
  explicit ConvPoolRewriter(ir::Graph& g) : g_(g), users_(g), rewrite_(g) {}

  absl::StatusOr<bool> run() {
    std::vector<ConvPoolChain> chains;
    for (const auto& n : g_.nodes())
      if (ir::Conv2dView::is(*n))
        if (std::optional<ConvPoolChain> c = match(*n)) chains.push_back(*c);
    if (chains.empty()) return false;
    for (const ConvPoolChain& c : chains) RETURN_IF_ERROR(fuse(c));
    rewrite_.apply();
    return true;
  }

 private:
  /// avg_pool2d{relu} or its backward over 2x2 windows of stride 2, unpadded, floor.
  template <typename View>
  static bool pairPool(const View& p) {
    return p.relu() && p.kernel() == ir::Hw(2) && p.stride() == ir::Hw(2) && p.pad() == ir::Hw(0) &&
           !p.ceil_mode();
  }

  std::optional<ConvPoolChain> match(Node& conv_node) const {
    const ir::Conv2dView conv(conv_node);
    const ir::Shape& w = conv.w()->type().shape;
    if (conv.x()->type().dtype != ir::DType::kF32 || conv.w()->type().dtype != ir::DType::kF32 ||
        w[1] * w[2] * w[3] > FuseConvReluPool::kMaxTaps ||
        conv.y()->type().shape[3] > FuseConvReluPool::kMaxRowWidth)
      return std::nullopt;
    const Value* y = conv.y();
    if (users_.returned(y)) return std::nullopt;
    ConvPoolChain c{.conv = &conv_node, .pool = nullptr};
    for (Node* u : users_.of(y)) {
      if (ir::AvgPool2dView::is(*u) && c.pool == nullptr && pairPool(ir::AvgPool2dView(*u))) {
        c.pool = u;
      } else if (ir::AvgPool2dBackwardView::is(*u) && c.pool_backward == nullptr &&
                 ir::AvgPool2dBackwardView(*u).x() == y &&
                 ir::AvgPool2dBackwardView(*u).dy() != y &&
                 pairPool(ir::AvgPool2dBackwardView(*u))) {
        c.pool_backward = u;
      } else {
        return std::nullopt;
      }
    }
    if (c.pool == nullptr) return std::nullopt;
    if (c.pool_backward == nullptr) return c;
    // The pool's gradient feeds the filter's gradient alone: x needs none.
    const Value* dx = c.pool_backward->result();
    c.filter = users_.only(dx);
    if (c.filter == nullptr || !ir::Conv2dBackwardFilterView::is(*c.filter)) return std::nullopt;
    const ir::Conv2dBackwardFilterView f(*c.filter);
    if (f.dy() != dx || f.x() != conv.x() || f.w() != conv.w() || f.stride() != conv.stride() ||
        f.pad() != conv.pad() || f.groups() != conv.groups() || f.bias() != (conv.b() != nullptr))
      return std::nullopt;
    return c;
  }

  absl::Status fuse(const ConvPoolChain& c) {
    const ir::Conv2dView conv(*c.conv);
    const std::string scope = FusionRewrite::joinedScopes({c.conv, c.pool});
    Value* pooled = ir::AvgPool2dView(*c.pool).y();
    const std::string name = rewrite_.takeName(pooled);
    ASSIGN_OR_RETURN(Node * forward, rewrite_.add(*c.pool,
                                                  ir::Conv2dReluAvgPoolArgs{.x = conv.x(),
                                                                            .w = conv.w(),
                                                                            .b = conv.b(),
                                                                            .stride = conv.stride(),
                                                                            .pad = conv.pad(),
                                                                            .groups = conv.groups()}
                                                      .spec({.names = {name, name + ".mask"}}),
                                                  scope, c.conv->location()));
    rewrite_.replace(pooled, forward->result(0));
    rewrite_.absorb({c.conv, c.pool});
    if (c.pool_backward == nullptr) return absl::OkStatus();

    const ir::Conv2dBackwardFilterView filter(*c.filter);
    std::vector<std::string> names{rewrite_.takeName(filter.dw())};
    if (filter.db() != nullptr) names.push_back(rewrite_.takeName(filter.db()));
    ASSIGN_OR_RETURN(Node * backward,
                     rewrite_.add(*c.filter,
                                  ir::Conv2dReluAvgPoolBackwardFilterArgs{
                                      .dy = ir::AvgPool2dBackwardView(*c.pool_backward).dy(),
                                      .x = conv.x(),
                                      .w = conv.w(),
                                      .mask = forward->result(1),
                                      .stride = conv.stride(),
                                      .pad = conv.pad(),
                                      .groups = conv.groups(),
                                      .bias = conv.b() != nullptr}
                                      .spec({.names = names}),
                                  FusionRewrite::joinedScopes({c.filter, c.pool_backward}),
                                  c.filter->location()));
    rewrite_.replace(filter.dw(), backward->result(0));
    if (filter.db() != nullptr) rewrite_.replace(filter.db(), backward->result(1));
    rewrite_.absorb({c.pool_backward, c.filter});
    return absl::OkStatus();
  }

  ir::Graph& g_;
  ValueUsers users_;
  FusionRewrite rewrite_;
};

}  // namespace

absl::StatusOr<bool> FuseConvReluPool::run(ir::Module& m) {
  if (m.isReplicated())
    return absl::FailedPreconditionError(
        "fuse-conv-relu-pool: the module is already replicated (run it before replicate)");
  bool changed = false;
  for (const auto& g : m.graphs()) {
    ASSIGN_OR_RETURN(bool c, ConvPoolRewriter(*g).run());
    changed = changed || c;
  }
  return changed;
}

absl::StatusOr<std::unique_ptr<Pass>> FuseConvReluPool::create(PassOptions& opts) {
  RETURN_IF_ERROR(opts.finish());
  return std::unique_ptr<Pass>(new FuseConvReluPool());
}

}  // namespace tandem::passes

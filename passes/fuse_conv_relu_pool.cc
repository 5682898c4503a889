#include "passes/fuse_conv_relu_pool.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"
#include "passes/insertions.h"
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
  explicit ConvPoolRewriter(ir::Graph& g) : g_(g), users_(g), pos_(g.positions()), insert_(g) {}

  absl::StatusOr<bool> run() {
    std::vector<ConvPoolChain> chains;
    for (const auto& n : g_.nodes())
      if (ir::Conv2dView::is(*n))
        if (std::optional<ConvPoolChain> c = match(*n)) chains.push_back(*c);
    if (chains.empty()) return false;
    for (const ConvPoolChain& c : chains) RETURN_IF_ERROR(fuse(c));
    apply();
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
    const std::string scope = joinedScopes({c.conv, c.pool});
    Value* pooled = ir::AvgPool2dView(*c.pool).y();
    const std::string name = takeName(pooled);
    ASSIGN_OR_RETURN(Node * forward, add(*c.pool,
                                         ir::Conv2dReluAvgPoolArgs{.x = conv.x(),
                                                                   .w = conv.w(),
                                                                   .b = conv.b(),
                                                                   .stride = conv.stride(),
                                                                   .pad = conv.pad(),
                                                                   .groups = conv.groups()}
                                             .spec({.names = {name, name + ".mask"}}),
                                         scope, c.conv->location()));
    replace_[pooled] = forward->result(0);
    absorbed_.insert({c.conv->id(), c.pool->id()});
    if (c.pool_backward == nullptr) return absl::OkStatus();

    const ir::Conv2dBackwardFilterView filter(*c.filter);
    std::vector<std::string> names{takeName(filter.dw())};
    if (filter.db() != nullptr) names.push_back(takeName(filter.db()));
    ASSIGN_OR_RETURN(Node * backward,
                     add(*c.filter,
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
                         joinedScopes({c.filter, c.pool_backward}), c.filter->location()));
    replace_[filter.dw()] = backward->result(0);
    if (filter.db() != nullptr) replace_[filter.db()] = backward->result(1);
    absorbed_.insert({c.pool_backward->id(), c.filter->id()});
    return absl::OkStatus();
  }

  /// "conv1 + pool1 + relu": each node's scope once, in order (the first names the layer
  /// in views, as the other fusion passes write them).
  static std::string joinedScopes(std::initializer_list<const Node*> nodes) {
    std::vector<std::string> scopes;
    for (const Node* n : nodes)
      for (absl::string_view s : absl::StrSplit(n->scope(), " + ", absl::SkipEmpty()))
        if (std::find(scopes.begin(), scopes.end(), s) == scopes.end()) scopes.emplace_back(s);
    return absl::StrJoin(scopes, " + ");
  }

  /// Creates a node (appended for now) to be placed just before `anchor`.
  absl::StatusOr<Node*> add(const Node& anchor, ir::NodeSpec spec, const std::string& scope,
                            const std::string& location) {
    spec.device = anchor.device();
    spec.scope = scope;
    spec.location = location;
    return insert_.add(pos_.at(&anchor) - 1, std::move(spec));
  }

  /// Frees `v`'s name for the node that replaces its definition.
  std::string takeName(Value* v) {
    std::string name = v->name();
    g_.rename(v, name + ".unfused");
    return name;
  }

  // Places the new nodes, redirects every use of a replaced value, drops what was absorbed.
  void apply() {
    insert_.apply();
    auto resolve = [&](Value* v) {
      auto it = replace_.find(v);
      return it == replace_.end() ? v : it->second;
    };
    for (const auto& n : g_.nodes())
      for (size_t i = 0; i < n->numOperands(); ++i) n->setOperand(i, resolve(n->operand(i)));
    std::vector<Value*> outputs = g_.outputs();
    for (Value*& v : outputs) v = resolve(v);
    g_.setOutputs(std::move(outputs));
    g_.eraseIf([&](const Node& n) { return absorbed_.contains(n.id()); });
  }

  ir::Graph& g_;
  ValueUsers users_;
  ir::Graph::Positions pos_;  // of the original nodes, where the new ones are anchored
  Insertions insert_;
  absl::flat_hash_map<Value*, Value*> replace_;
  absl::flat_hash_set<uint32_t> absorbed_;
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

#include "passes/fuse_conv_bn_relu.h"

#include <algorithm>
#include <vector>

#include "ir/op_views.h"
#include "ir/status_macros.h"
#include "passes/fusion_rewrite.h"
#include "passes/value_users.h"

namespace tandem::passes {

using ir::Node;
using ir::Op;
using ir::Value;

namespace {

/// One conv -> batch_norm [-> add] [-> relu] chain and the backward nodes it owns.
struct Chain {
  Node* conv = nullptr;
  Node* bn = nullptr;
  Node* add = nullptr;       // the residual join, when the chain ends in add -> relu
  Value* residual = nullptr;  // add's other operand
  Node* relu = nullptr;
  Node* relu_backward = nullptr;  // train: relu's backward (its output feeds bn_backward)
  Node* bn_backward = nullptr;    // train: batch_norm_backward of `bn`
  /// The value the chain's consumers read: relu's output, else batch norm's.
  Value* output() const {
    return relu ? relu->result() : bn->result();
  }
};

/// The rewrite of one graph: new nodes appended while the chains are found, placed at
/// their anchors by one rebuild of the node list, uses redirected by one sweep, the
/// absorbed nodes erased.
class Rewriter {
 public:
  explicit Rewriter(ir::Graph& g) : g_(g), users_(g), rewrite_(g) {}

  absl::StatusOr<bool> run() {
    std::vector<Chain> chains;
    for (const auto& n : g_.nodes())
      if (ir::BatchNormView::is(*n))
        if (auto c = match(*n)) chains.push_back(*c);
    if (chains.empty()) return false;
    for (const Chain& c : chains)
      RETURN_IF_ERROR(ir::BatchNormView(*c.bn).training() ? fuseTraining(c) : fuseInference(c));
    rewrite_.apply();
    return true;
  }

 private:
  /// The users of `v` other than `skip`.
  std::vector<Node*> usersBut(const Value* v, const Node* skip) const {
    std::vector<Node*> out;
    for (Node* u : users_.of(v))
      if (u != skip) out.push_back(u);
    return out;
  }

  std::optional<Chain> match(Node& bn) const {
    Chain c;
    c.bn = &bn;
    c.conv = ir::BatchNormView(bn).x()->def();
    if (c.conv == nullptr || !ir::Conv2dView::is(*c.conv)) return std::nullopt;
    const bool training = ir::BatchNormView(bn).training();
    // Inference folds the batch norm into the convolution's weights: the convolution's
    // raw output must have no other reader.
    if (!training && users_.only(c.conv->result()) != &bn) return std::nullopt;
    if (Node* next = users_.only(bn.result()); next != nullptr) {
      if (ir::ReluView::is(*next)) {
        c.relu = next;
      } else if (ir::AddView::is(*next) && ir::AddView(*next).a() == bn.result() &&
                 ir::AddView(*next).b() != bn.result()) {
        if (Node* r = users_.only(next->result()); r != nullptr && ir::ReluView::is(*r)) {
          c.add = next;
          c.residual = ir::AddView(*next).b();
          c.relu = r;
        }
      }
    }
    if (!training) return c;
    for (Node* u : users_.of(bn.result(1)))
      if (ir::BatchNormBackwardView::is(*u) &&
          ir::BatchNormBackwardView(*u).save_mean() == bn.result(1))
        c.bn_backward = u;
    if (c.relu != nullptr && c.bn_backward != nullptr) {
      // relu's backward must be what feeds batch norm's backward; anything else (a model
      // that reads batch norm's output twice) keeps the unfused backward.
      Node* rb = ir::BatchNormBackwardView(*c.bn_backward).dy()->def();
      if (rb == nullptr || !ir::ReluBackwardView::is(*rb) ||
          ir::ReluBackwardView(*rb).y() != c.relu->result())
        return std::nullopt;
      c.relu_backward = rb;
    }
    return c;
  }

  absl::StatusOr<Node*> add(const Node& anchor, ir::NodeSpec spec, const std::string& scope,
                            const std::string& location) {
    return rewrite_.add(anchor, std::move(spec), scope, location);
  }
  std::string takeName(Value* v) { return rewrite_.takeName(v); }

  absl::Status fuseTraining(const Chain& c) {
    const ir::Conv2dView conv(*c.conv);
    const ir::BatchNormView bn(*c.bn);
    const std::string scope = FusionRewrite::joinedScopes({c.conv, c.bn, c.add, c.relu});
    // conv2d_stats where the convolution was.
    std::string y_name = takeName(conv.y());
    ASSIGN_OR_RETURN(Node * stats, add(*c.conv,
                                       ir::Conv2dStatsArgs{.x = conv.x(),
                                                           .w = conv.w(),
                                                           .b = conv.b(),
                                                           .stride = conv.stride(),
                                                           .pad = conv.pad(),
                                                           .groups = conv.groups()}
                                           .spec({.names = {y_name, y_name + ".stats"}}),
                                       scope, c.conv->location()));
    rewrite_.replace(conv.y(), stats->result(0));
    // batch_norm_apply where the chain's last forward node was.
    const Node& last = c.relu ? *c.relu : *c.bn;
    Value* out = c.output();
    std::vector<std::string> names{takeName(out), takeName(bn.save_mean()),
                                   takeName(bn.save_invstd())};
    ASSIGN_OR_RETURN(Node * apply, add(last,
                                       ir::BatchNormApplyArgs{.y = stats->result(0),
                                                              .stats = stats->result(1),
                                                              .gamma = bn.gamma(),
                                                              .beta = bn.beta(),
                                                              .running_mean = bn.running_mean(),
                                                              .running_var = bn.running_var(),
                                                              .residual = c.residual,
                                                              .momentum = bn.momentum(),
                                                              .eps = bn.eps(),
                                                              .relu = c.relu != nullptr}
                                           .spec({.names = names}),
                                       scope, c.bn->location()));
    rewrite_.replace(out, apply->result(0));
    rewrite_.replace(bn.save_mean(), apply->result(1));
    rewrite_.replace(bn.save_invstd(), apply->result(2));
    rewrite_.absorb({c.conv, c.bn, c.add, c.relu});
    if (c.bn_backward == nullptr) return absl::OkStatus();

    // Backward, where relu's backward was (or batch norm's, without relu): everything it
    // reads is defined by then, and the residual's other readers may come before batch
    // norm's backward.
    const ir::BatchNormBackwardView bb(*c.bn_backward);
    const Node& anchor = c.relu_backward ? *c.relu_backward : *c.bn_backward;
    Value* dout = c.relu_backward ? ir::ReluBackwardView(*c.relu_backward).dy() : bb.dy();
    // With relu, the fused output says where the gradient passes (out > 0).
    Value* relu_out = c.relu != nullptr ? apply->result(0) : nullptr;
    const std::string bscope = absl::StrCat(scope, " (backward)");
    ASSIGN_OR_RETURN(Node * reduce,
                     add(anchor,
                         ir::BatchNormBackwardReduceArgs{.dout = dout,
                                                         .y = stats->result(0),
                                                         .save_mean = apply->result(1),
                                                         .save_invstd = apply->result(2),
                                                         .out = relu_out}
                             .spec({.names = {y_name + ".bn_sums", takeName(bb.dbeta()),
                                              takeName(bb.dgamma())}}),
                         bscope, c.bn_backward->location()));
    std::vector<std::string> grad_names{takeName(bb.dx())};
    const bool residual = c.residual != nullptr && !usersBut(bb.dy(), c.bn_backward).empty();
    if (residual) grad_names.push_back(takeName(bb.dy()));
    ASSIGN_OR_RETURN(Node * grad,
                     add(anchor,
                         ir::BatchNormBackwardApplyArgs{.dout = dout,
                                                        .y = stats->result(0),
                                                        .gamma = bn.gamma(),
                                                        .save_mean = apply->result(1),
                                                        .save_invstd = apply->result(2),
                                                        .sums = reduce->result(0),
                                                        .stats = stats->result(1),
                                                        .out = relu_out,
                                                        .residual = residual}
                             .spec({.names = grad_names}),
                         bscope, c.bn_backward->location()));
    rewrite_.replace(bb.dx(), grad->result(0));
    rewrite_.replace(bb.dgamma(), reduce->result(2));
    rewrite_.replace(bb.dbeta(), reduce->result(1));
    // The residual's gradient is relu's masked gradient, which the add passed on as is.
    if (residual) rewrite_.replace(bb.dy(), grad->result(1));
    rewrite_.absorb({c.relu_backward, c.bn_backward});
    return absl::OkStatus();
  }

  absl::Status fuseInference(const Chain& c) {
    const ir::Conv2dView conv(*c.conv);
    const ir::BatchNormView bn(*c.bn);
    const std::string scope = FusionRewrite::joinedScopes({c.conv, c.bn, c.add, c.relu});
    // Both at the chain's last node: batch norm's parameters may be read after the conv.
    const Node& last = c.relu ? *c.relu : *c.bn;
    const std::string base = conv.y()->name();
    ASSIGN_OR_RETURN(Node * fold,
                     add(last,
                         ir::FoldBatchNormArgs{.w = conv.w(),
                                               .b = conv.b(),
                                               .gamma = bn.gamma(),
                                               .beta = bn.beta(),
                                               .running_mean = bn.running_mean(),
                                               .running_var = bn.running_var(),
                                               .eps = bn.eps()}
                             .spec({.names = {base + ".w.folded", base + ".b.folded"}}),
                         scope, c.bn->location()));
    Value* out = c.output();
    ASSIGN_OR_RETURN(Node * fused, add(last,
                                       ir::Conv2dBiasActArgs{.x = conv.x(),
                                                             .w = fold->result(0),
                                                             .b = fold->result(1),
                                                             .residual = c.residual,
                                                             .stride = conv.stride(),
                                                             .pad = conv.pad(),
                                                             .groups = conv.groups(),
                                                             .relu = c.relu != nullptr}
                                           .spec({.names = {takeName(out)}}),
                                       scope, c.conv->location()));
    rewrite_.replace(out, fused->result(0));
    rewrite_.absorb({c.conv, c.bn, c.add, c.relu});
    return absl::OkStatus();
  }

  ir::Graph& g_;
  ValueUsers users_;
  FusionRewrite rewrite_;
};

}  // namespace

absl::StatusOr<bool> FuseConvBnRelu::run(ir::Module& m) {
  if (m.isReplicated())
    return absl::FailedPreconditionError(
        "fuse-conv-bn-relu: the module is already replicated (run it before replicate)");
  bool changed = false;
  for (const auto& g : m.graphs()) {
    ASSIGN_OR_RETURN(bool c, Rewriter(*g).run());
    changed = changed || c;
  }
  return changed;
}

absl::StatusOr<std::unique_ptr<Pass>> FuseConvBnRelu::create(PassOptions& opts) {
  RETURN_IF_ERROR(opts.finish());
  return std::unique_ptr<Pass>(new FuseConvBnRelu());
}

}  // namespace tandem::passes

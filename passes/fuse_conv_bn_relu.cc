#include "passes/fuse_conv_bn_relu.h"

#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_join.h"
#include "ir/status_macros.h"
#include "passes/insertions.h"

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
  explicit Rewriter(ir::Graph& g)
      : g_(g), users_(g.users()), pos_(g.positions()), insert_(g) {}

  absl::StatusOr<bool> run() {
    std::vector<Chain> chains;
    for (const auto& n : g_.nodes())
      if (n->op() == Op::kBatchNorm)
        if (auto c = match(*n)) chains.push_back(*c);
    if (chains.empty()) return false;
    for (const Chain& c : chains)
      RETURN_IF_ERROR(c.bn->boolAttr("training") ? fuseTraining(c) : fuseInference(c));
    apply();
    return true;
  }

 private:
  const std::vector<Node*>& usersOf(const Value* v) const {
    static const std::vector<Node*> kNone;
    auto it = users_.find(v);
    return it == users_.end() ? kNone : it->second;
  }
  Node* onlyUser(const Value* v) const {
    const auto& u = usersOf(v);
    return u.size() == 1 && !isReturned(v) ? u[0] : nullptr;
  }
  bool isReturned(const Value* v) const {
    return std::find(g_.outputs().begin(), g_.outputs().end(), v) != g_.outputs().end();
  }
  /// The users of `v` other than `skip`.
  std::vector<Node*> usersBut(const Value* v, const Node* skip) const {
    std::vector<Node*> out;
    for (Node* u : usersOf(v))
      if (u != skip) out.push_back(u);
    return out;
  }

  std::optional<Chain> match(Node& bn) const {
    Chain c;
    c.bn = &bn;
    c.conv = bn.operand(0)->def();
    if (c.conv == nullptr || c.conv->op() != Op::kConv2d) return std::nullopt;
    const bool training = bn.boolAttr("training");
    // Inference folds the batch norm into the convolution's weights: the convolution's
    // raw output must have no other reader.
    if (!training && onlyUser(c.conv->result()) != &bn) return std::nullopt;
    if (Node* next = onlyUser(bn.result()); next != nullptr) {
      if (next->op() == Op::kRelu) {
        c.relu = next;
      } else if (next->op() == Op::kAdd && next->operand(0) == bn.result() &&
                 next->operand(1) != bn.result()) {
        if (Node* r = onlyUser(next->result()); r != nullptr && r->op() == Op::kRelu) {
          c.add = next;
          c.residual = next->operand(1);
          c.relu = r;
        }
      }
    }
    if (!training) return c;
    for (Node* u : usersOf(bn.result(1)))
      if (u->op() == Op::kBatchNormBackward && u->operand(3) == bn.result(1)) c.bn_backward = u;
    if (c.relu != nullptr && c.bn_backward != nullptr) {
      // relu's backward must be what feeds batch norm's backward; anything else (a model
      // that reads batch norm's output twice) keeps the unfused backward.
      Node* rb = c.bn_backward->operand(0)->def();
      if (rb == nullptr || rb->op() != Op::kReluBackward || rb->operand(1) != c.relu->result())
        return std::nullopt;
      c.relu_backward = rb;
    }
    return c;
  }

  /// "stage1.block0.conv1 + stage1.block0.bn1 + stage1.block0.relu".
  static std::string absorbedScopes(std::initializer_list<const Node*> nodes) {
    std::vector<std::string> scopes;
    for (const Node* n : nodes)
      if (n != nullptr && !n->scope().empty() &&
          std::find(scopes.begin(), scopes.end(), n->scope()) == scopes.end())
        scopes.push_back(n->scope());
    return absl::StrJoin(scopes, " + ");
  }

  /// Creates a node (appended for now) to be placed just before `anchor`.
  absl::StatusOr<Node*> add(const Node& anchor, ir::NodeSpec spec, const std::string& scope,
                            const std::string& location) {
    spec.device = anchor.device();
    spec.scope = scope;
    spec.location = location;
    // Anchors are never the first node (inputs come first): right after the one before.
    return insert_.add(pos_.at(&anchor) - 1, std::move(spec));
  }

  /// Frees `v`'s name for the node that replaces its definition.
  std::string takeName(Value* v) {
    std::string name = v->name();
    g_.rename(v, name + ".unfused");
    return name;
  }

  void absorb(std::initializer_list<Node*> nodes) {
    for (Node* n : nodes)
      if (n != nullptr) absorbed_.insert(n->id());
  }

  absl::Status fuseTraining(const Chain& c) {
    const Node& conv = *c.conv;
    const Node& bn = *c.bn;
    const std::string scope = absorbedScopes({c.conv, c.bn, c.add, c.relu});
    // conv2d_stats where the convolution was.
    std::vector<Value*> conv_in(conv.operands().begin(), conv.operands().end());
    std::string y_name = takeName(conv.result());
    ASSIGN_OR_RETURN(
        Node * stats,
        add(conv,
            {.op = Op::kConv2dStats,
             .operands = conv_in,
             .attrs = {{"stride", conv.intAttr("stride")}, {"pad", conv.intAttr("pad")}},
             .names = {y_name, y_name + ".stats"}},
            scope, conv.location()));
    replace_[conv.result()] = stats->result(0);
    // batch_norm_apply where the chain's last forward node was.
    const Node& last = c.relu ? *c.relu : bn;
    std::vector<Value*> apply_in{stats->result(0), stats->result(1), bn.operand(1),
                                 bn.operand(2),    bn.operand(3),    bn.operand(4)};
    if (c.residual != nullptr) apply_in.push_back(c.residual);
    Value* out = c.output();
    std::vector<std::string> names{takeName(out), takeName(bn.result(1)), takeName(bn.result(2))};
    ASSIGN_OR_RETURN(Node * apply,
                     add(last,
                         {.op = Op::kBatchNormApply,
                          .operands = apply_in,
                          .attrs = {{"momentum", bn.floatAttr("momentum")},
                                    {"eps", bn.floatAttr("eps")},
                                    {"relu", c.relu != nullptr}},
                          .names = names},
                         scope, bn.location()));
    replace_[out] = apply->result(0);
    replace_[bn.result(1)] = apply->result(1);
    replace_[bn.result(2)] = apply->result(2);
    absorb({c.conv, c.bn, c.add, c.relu});
    if (c.bn_backward == nullptr) return absl::OkStatus();

    // Backward, where relu's backward was (or batch norm's, without relu): everything it
    // reads is defined by then, and the residual's other readers may come before batch
    // norm's backward.
    const Node& bb = *c.bn_backward;
    const Node& anchor = c.relu_backward ? *c.relu_backward : bb;
    Value* dout = c.relu_backward ? c.relu_backward->operand(0) : bb.operand(0);
    std::vector<Value*> reduce_in{dout, stats->result(0), apply->result(1), apply->result(2)};
    if (c.relu != nullptr) reduce_in.push_back(apply->result(0));
    const std::string bscope = absl::StrCat(scope, " (backward)");
    ASSIGN_OR_RETURN(Node * reduce, add(anchor,
                                        {.op = Op::kBatchNormBackwardReduce,
                                         .operands = reduce_in,
                                         .names = {y_name + ".bn_sums", takeName(bb.result(2)),
                                                   takeName(bb.result(1))}},
                                        bscope, bb.location()));
    std::vector<Value*> apply_grad_in{dout,
                                      stats->result(0),
                                      bn.operand(1),
                                      apply->result(1),
                                      apply->result(2),
                                      reduce->result(0),
                                      stats->result(1)};
    if (c.relu != nullptr) apply_grad_in.push_back(apply->result(0));
    std::vector<std::string> grad_names{takeName(bb.result(0))};
    const bool residual = c.residual != nullptr && !usersBut(bb.operand(0), &bb).empty();
    if (residual) grad_names.push_back(takeName(bb.operand(0)));
    ASSIGN_OR_RETURN(Node * grad, add(anchor,
                                      {.op = Op::kBatchNormBackwardApply,
                                       .operands = apply_grad_in,
                                       .attrs = {{"residual", residual}},
                                       .names = grad_names},
                                      bscope, bb.location()));
    replace_[bb.result(0)] = grad->result(0);
    replace_[bb.result(1)] = reduce->result(2);
    replace_[bb.result(2)] = reduce->result(1);
    // The residual's gradient is relu's masked gradient, which the add passed on as is.
    if (residual) replace_[bb.operand(0)] = grad->result(1);
    absorb({c.relu_backward, c.bn_backward});
    return absl::OkStatus();
  }

  absl::Status fuseInference(const Chain& c) {
    const Node& conv = *c.conv;
    const Node& bn = *c.bn;
    const std::string scope = absorbedScopes({c.conv, c.bn, c.add, c.relu});
    // Both at the chain's last node: batch norm's parameters may be read after the conv.
    const Node& last = c.relu ? *c.relu : bn;
    std::vector<Value*> fold_in{conv.operand(1)};
    if (conv.numOperands() > 2) fold_in.push_back(conv.operand(2));
    for (size_t i = 1; i <= 4; ++i) fold_in.push_back(bn.operand(i));
    const std::string base = conv.result()->name();
    ASSIGN_OR_RETURN(Node * fold, add(last,
                                      {.op = Op::kFoldBatchNorm,
                                       .operands = fold_in,
                                       .attrs = {{"eps", bn.floatAttr("eps")}},
                                       .names = {base + ".w.folded", base + ".b.folded"}},
                                      scope, bn.location()));
    std::vector<Value*> conv_in{conv.operand(0), fold->result(0), fold->result(1)};
    if (c.residual != nullptr) conv_in.push_back(c.residual);
    Value* out = c.output();
    ASSIGN_OR_RETURN(
        Node * fused,
        add(last,
            {.op = Op::kConv2dBiasAct,
             .operands = conv_in,
             .attrs = {{"stride", conv.intAttr("stride")},
                       {"pad", conv.intAttr("pad")},
                       {"relu", c.relu != nullptr}},
             .names = {takeName(out)}},
            scope, conv.location()));
    replace_[out] = fused->result(0);
    absorb({c.conv, c.bn, c.add, c.relu});
    return absl::OkStatus();
  }

  // Places the new nodes, redirects every use of a replaced value, drops what was absorbed.
  void apply() {
    insert_.apply();
    auto resolve = [&](Value* v) {
      for (auto it = replace_.find(v); it != replace_.end(); it = replace_.find(v)) v = it->second;
      return v;
    };
    for (const auto& n : g_.nodes())
      for (size_t i = 0; i < n->numOperands(); ++i) n->setOperand(i, resolve(n->operand(i)));
    std::vector<Value*> outputs = g_.outputs();
    for (Value*& v : outputs) v = resolve(v);
    g_.setOutputs(std::move(outputs));
    g_.eraseIf([&](const Node& n) { return absorbed_.contains(n.id()); });
  }

  ir::Graph& g_;
  absl::flat_hash_map<const Value*, std::vector<Node*>> users_;
  ir::Graph::Positions pos_;  // of the original nodes, where the new ones are anchored
  Insertions insert_;
  absl::flat_hash_map<Value*, Value*> replace_;
  absl::flat_hash_set<uint32_t> absorbed_;
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

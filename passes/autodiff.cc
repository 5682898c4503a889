// autodiff: turns the forward train_step into a training step. It walks the graph
// backwards from the loss, asks each op's gradient rule (ir/ops/) for the gradients of
// its operands, sums gradients that meet at one value, and ends with one sgd_update per
// trained variable, in the order backward produces their gradients.

#include "passes/autodiff.h"

#include <cmath>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ir/grad.h"
#include "ir/number_format.h"
#include "ir/status_macros.h"
#include "ir/updates.h"
#include "passes/sgd_hyperparameters.h"

namespace tandem::passes {

using ir::Node;
using ir::Op;
using ir::Value;

namespace {

class AutodiffContext final : public ir::GradContext {
 public:
  AutodiffContext(ir::Graph& g, absl::flat_hash_map<const Value*, Value*>& grads,
                  const absl::flat_hash_set<const Value*>& needs)
      : g_(g), grads_(grads), needs_(needs) {}

  void reset(const Node* n) {
    node_ = n;
    status_ = absl::OkStatus();
  }
  const absl::Status& status() const { return status_; }

  const Node& node() const override { return *node_; }
  Value* resultGrad(size_t i) const override {
    auto it = grads_.find(node_->result(i));
    return it == grads_.end() ? nullptr : it->second;
  }
  bool needsGrad(size_t i) const override { return needs_.contains(node_->operand(i)); }

  void addOperandGrad(size_t i, Value* grad) override {
    const Value* v = node_->operand(i);
    if (grad->type().dtype != v->type().dtype) {
      // A gradient computed in another dtype than its operand's (linear_backward_weight
      // gives bf16 for an f32 master weight under mixed precision): cast it to the
      // operand's, as the cast op's own gradient rule would.
      auto cast = emit(Op::kCast, {grad},
                       {{"dtype", ir::EnumWord{std::string(ir::dtypeName(v->type().dtype))}}},
                       {absl::StrCat(grad->name(), ".", ir::dtypeName(v->type().dtype))});
      if (!cast.ok()) {
        status_.Update(cast.status());
        return;
      }
      grad = (*cast)->result();
    }
    auto [it, inserted] = grads_.emplace(v, grad);
    if (inserted) return;
    // A value used by several nodes: its gradient is the sum of what each use gives.
    auto sum = emit(Op::kAdd, {it->second, grad}, {}, {ir::gradName(v)});
    if (!sum.ok()) {
      status_.Update(sum.status());
      return;
    }
    it->second = (*sum)->result();
  }

  absl::StatusOr<Node*> emit(Op op, std::vector<Value*> operands,
                             std::vector<std::pair<std::string, ir::AttrValue>> attrs,
                             std::vector<std::string> names) override {
    for (Value* v : operands)
      if (v == nullptr)
        return absl::InternalError(
            absl::StrCat("gradient rule of ", node_->opName(), " used a missing gradient"));
    return g_.create({.op = op,
                      .operands = std::move(operands),
                      .attrs = std::move(attrs),
                      .device = node_->device(),
                      .names = std::move(names),
                      .scope = node_->scope(),
                      .location = node_->location()});
  }

 private:
  ir::Graph& g_;
  absl::flat_hash_map<const Value*, Value*>& grads_;
  const absl::flat_hash_set<const Value*>& needs_;
  const Node* node_ = nullptr;
  absl::Status status_;
};

absl::StatusOr<const Node*> findLoss(const ir::Graph& g) {
  const Node* loss = nullptr;
  for (const auto& n : g.nodes()) {
    if (ir::isUpdate(n->op()))
      return absl::FailedPreconditionError(absl::StrCat(
          "autodiff: graph @", g.name(), " already has a backward pass (", n->describe(), ")"));
    if (!n->info().has(ir::kLoss)) continue;
    if (loss != nullptr)
      return absl::FailedPreconditionError(
          absl::StrCat("autodiff: graph @", g.name(), " has two losses, ", loss->describe(),
                       " and ", n->describe(), "; expected exactly one"));
    loss = n.get();
  }
  if (loss == nullptr)
    return absl::FailedPreconditionError(
        absl::StrCat("autodiff: graph @", g.name(), " has no loss (a softmax_cross_entropy node)"));
  return loss;
}

}  // namespace

absl::StatusOr<bool> Autodiff::run(ir::Module& m) {
  ir::Graph* g = m.graph(ir::kTrainGraph);
  if (g == nullptr) return absl::FailedPreconditionError("autodiff: the module has no @train_step");
  if (m.isReplicated())
    return absl::FailedPreconditionError(
        "autodiff: run it before replicate (the module is already replicated)");
  auto loss = findLoss(*g);
  if (!loss.ok()) return loss.status();

  // Forward sweep: which values depend on a trained variable.
  absl::flat_hash_set<const Value*> needs;
  std::vector<const Node*> trained_reads;
  size_t loss_pos = 0;
  for (size_t i = 0; i < g->numNodes(); ++i) {
    const Node* n = g->nodes()[i].get();
    if (n == *loss) loss_pos = i;
    bool depends = false;
    if (n->op() == Op::kParam) {
      const ir::Var* var = m.findVar(n->symbolAttr("var"));
      depends = var != nullptr && var->role == ir::VarRole::kParam;
      if (depends) trained_reads.push_back(n);
    } else {
      for (const Value* v : n->operands()) depends = depends || needs.contains(v);
    }
    if (depends)
      for (size_t r = 0; r < n->numResults(); ++r) needs.insert(n->result(r));
  }

  // Backward sweep from the loss, seeded with d(loss)/d(loss) = 1.
  absl::flat_hash_map<const Value*, Value*> grads;
  const Value* loss_value = (*loss)->result();
  auto seed = g->create({.op = Op::kConstant,
                         .attrs = {{"value", 1.0}},
                         .names = {ir::gradName(loss_value)},
                         .declared_types = {loss_value->type()},
                         .scope = (*loss)->scope()});
  if (!seed.ok()) return seed.status();
  grads[loss_value] = (*seed)->result();
  AutodiffContext ctx(*g, grads, needs);
  for (size_t i = loss_pos + 1; i-- > 0;) {
    const Node* n = g->nodes()[i].get();
    if (n->op() == Op::kParam || !needs.contains(n->numResults() ? n->result() : nullptr)) continue;
    bool has_grad = false;
    for (size_t r = 0; r < n->numResults(); ++r)
      has_grad = has_grad || grads.contains(n->result(r));
    if (!has_grad) continue;
    if (n->info().rules->grad == nullptr)
      return absl::UnimplementedError(
          absl::StrCat("autodiff: ", n->describe(), ": op ", n->opName(), " has no gradient rule"));
    ctx.reset(n);
    absl::Status s = n->info().rules->grad(ctx);
    s.Update(ctx.status());
    if (!s.ok())
      return absl::Status(s.code(), absl::StrCat("autodiff: ", n->describe(), ": ", s.message()));
  }

  // One gradient per variable: a variable read by several param nodes gets the sum of
  // what each read receives.
  absl::flat_hash_map<absl::string_view, std::pair<const Node*, Value*>> per_var;
  std::vector<absl::string_view> var_order;
  for (const Node* read : trained_reads) {
    auto it = grads.find(read->result());
    if (it == grads.end()) continue;  // this read does not influence the loss
    absl::string_view var = read->symbolAttr("var");
    auto [slot, inserted] = per_var.try_emplace(var, read, it->second);
    if (inserted) {
      var_order.push_back(var);
      continue;
    }
    auto sum = g->create({.op = Op::kAdd,
                          .operands = {slot->second.second, it->second},
                          .names = {ir::gradName(slot->second.first->result())},
                          .scope = read->scope()});
    if (!sum.ok()) return sum.status();
    slot->second.second = (*sum)->result();
  }

  // Updates, ordered by when backward produces each gradient (the order a data-parallel
  // step can start reducing them).
  auto pos = g->positions();
  std::vector<std::pair<size_t, absl::string_view>> ready;
  for (absl::string_view var : var_order)
    ready.emplace_back(pos.at(per_var.at(var).second->def()), var);
  std::stable_sort(ready.begin(), ready.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  ir::Graph* init = m.graph(ir::kInitGraph);
  for (const auto& [unused, var_name] : ready) {
    const auto& [read, grad] = per_var.at(var_name);
    Value* w = read->result();
    std::vector<Value*> operands{w, grad};
    if (momentum_ > 0) {
      // The momentum buffer is optimizer state: a zero-initialized variable of its own.
      const ir::Var& var = *m.findVar(read->symbolAttr("var"));
      std::string buffer = var.name + ".momentum";
      if (m.findVar(buffer) == nullptr) {
        RETURN_IF_ERROR(m.addVar({buffer, var.type, ir::VarRole::kOptimizer,
                                  ir::Initializer{ir::Initializer::Kind::kZeros}}));
        if (init != nullptr) {
          auto value = init->create(
              {.op = Op::kInitialize, .attrs = {{"var", ir::Symbol{buffer}}}, .names = {buffer}});
          if (!value.ok()) return value.status();
          auto assign = init->create({.op = Op::kAssign,
                                      .operands = {(*value)->result()},
                                      .attrs = {{"var", ir::Symbol{buffer}}}});
          if (!assign.ok()) return assign.status();
        }
      }
      auto m_read = g->create({.op = Op::kParam,
                               .attrs = {{"var", ir::Symbol{buffer}}},
                               .names = {buffer},
                               .scope = read->scope()});
      if (!m_read.ok()) return m_read.status();
      operands.push_back((*m_read)->result());
    }
    auto update =
        g->create({.op = Op::kSgdUpdate,
                   .operands = std::move(operands),
                   .attrs = {{"lr", lr_}, {"momentum", momentum_}, {"weight_decay", weight_decay_}},
                   .scope = read->scope()});
    if (!update.ok()) return update.status();
  }
  return true;
}

std::string Autodiff::optionsText() const {
  return absl::StrCat("{lr=", ir::formatDouble(lr_), ",momentum=", ir::formatDouble(momentum_),
                      ",weight-decay=", ir::formatDouble(weight_decay_), "}");
}

absl::StatusOr<std::unique_ptr<Pass>> Autodiff::create(PassOptions& opts) {
  auto lr = opts.getDouble("lr", 0.1);
  auto momentum = opts.getDouble("momentum", 0.0);
  auto wd = opts.getDouble("weight-decay", 0.0);
  for (const auto* s : {&lr, &momentum, &wd})
    if (!s->ok()) return s->status();
  RETURN_IF_ERROR(opts.finish());
  // The ranges `train` takes too (sgd_hyperparameters.h).
  using H = SgdHyperparameter;
  for (auto [name, which, value] :
       {std::tuple{"lr", H::kLr, *lr}, std::tuple{"momentum", H::kMomentum, *momentum},
        std::tuple{"weight-decay", H::kWeightDecay, *wd}})
    if (std::string problem = sgdValueProblem(which, value); !problem.empty())
      return absl::InvalidArgumentError(
          absl::StrCat("pass autodiff: option '", name, "' ", problem));
  return std::unique_ptr<Pass>(new Autodiff(*lr, *momentum, *wd));
}

}  // namespace tandem::passes

// autodiff: turns the forward train_step into a training step. It walks the graph
// backwards from the loss, asks each op's gradient rule (ir/ops/) for the gradients of
// its operands, sums gradients that meet at one value, and ends with one optimizer update
// per trained variable, in the order backward produces their gradients.

#include "passes/autodiff.h"

#include <cmath>
#include <limits>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "ir/grad.h"
#include "ir/interfaces.h"
#include "ir/number_format.h"
#include "ir/op_views.h"
#include "ir/status_macros.h"
#include "passes/optimizer_options.h"

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
      auto cast = emit(
          ir::CastArgs{.x = grad, .dtype = *ir::parseCastType(ir::dtypeName(v->type().dtype))}.spec(
              {.names = {absl::StrCat(grad->name(), ".", ir::dtypeName(v->type().dtype))}}));
      if (!cast.ok()) {
        status_.Update(cast.status());
        return;
      }
      grad = (*cast)->result();
    }
    auto [it, inserted] = grads_.emplace(v, grad);
    if (inserted) return;
    // A value used by several nodes: its gradient is the sum of what each use gives.
    auto sum = emit(ir::AddArgs{.a = it->second, .b = grad}.spec({.names = {ir::gradName(v)}}));
    if (!sum.ok()) {
      status_.Update(sum.status());
      return;
    }
    it->second = (*sum)->result();
  }

  using ir::GradContext::emit;
  absl::StatusOr<Node*> emit(ir::NodeSpec spec) override {
    for (Value* v : spec.operands)
      if (v == nullptr)
        return absl::InternalError(
            absl::StrCat("gradient rule of ", node_->opName(), " used a missing gradient"));
    spec.device = node_->device();
    spec.scope = node_->scope();
    spec.location = node_->location();
    return g_.create(std::move(spec));
  }

 private:
  ir::Graph& g_;
  absl::flat_hash_map<const Value*, Value*>& grads_;
  const absl::flat_hash_set<const Value*>& needs_;
  const Node* node_ = nullptr;
  absl::Status status_;
};

/// Reads optimizer state `s` of parameter `var` in : the variable
/// "<var>.<suffix>" of var's type (an f32[1] for a scalar state), created on first use with
/// its init (in  too).
absl::StatusOr<Value*> readState(ir::Module& m, ir::Graph& g, ir::Graph* init, const ir::Var& var,
                                 const ir::OptimizerStateSpec& s, const std::string& scope) {
  const std::string name = absl::StrCat(var.name, ".", s.var_suffix);
  if (m.findVar(name) == nullptr) {
    RETURN_IF_ERROR(
        m.addVar({name, s.typeFor(var.type), ir::VarRole::kOptimizer, ir::Initializer{s.init}}));
    if (init != nullptr) {
      ASSIGN_OR_RETURN(Node * value,
                       init->create(ir::InitializeArgs{.var = name}.spec({.names = {name}})));
      RETURN_IF_ERROR(
          init->create(ir::AssignArgs{.value = value->result(), .var = name}.spec()).status());
    }
  }
  ASSIGN_OR_RETURN(Node * state,
                   g.create(ir::ParamArgs{.var = name}.spec({.names = {name}, .scope = scope})));
  return state->result();
}

// The loss trained is what the step returns first, as the trainer reads it: a scalar f32,
// a loss op's or any value made from one (a sum of two losses). Other loss ops in the step
// are metrics (an L1 error beside a squared-error loss) and get no gradient.
absl::StatusOr<const Value*> findLoss(const ir::Graph& g) {
  for (const auto& n : g.nodes())
    if (ir::UpdateView::is(*n))
      return absl::FailedPreconditionError(absl::StrCat(
          "autodiff: graph @", g.name(), " already has a backward pass (", n->describe(), ")"));
  if (g.outputs().empty())
    return absl::FailedPreconditionError(
        absl::StrCat("autodiff: graph @", g.name(),
                     " returns nothing; its first result is the loss it trains (a scalar f32)"));
  const Value* loss = g.outputs().front();
  if (loss->type().dtype != ir::DType::kF32 || loss->type().numElements() != 1)
    return absl::FailedPreconditionError(
        absl::StrCat("autodiff: graph @", g.name(), " returns ", loss->def()->describe(), ": ",
                     ir::toString(loss->type()),
                     " first, but its first result is the loss it trains (a "
                     "scalar f32)"));
  return loss;
}

}  // namespace

namespace {

/// Whether a trained variable's read is a matrix for weight decay's parameter groups: the
/// weight of a linear layer, a convolution or a matrix product, and no embedding's table
/// (a table tied to an output projection stays an embedding, as nanoGPT groups it).
bool isMatrix(const Value* read,
              const absl::flat_hash_map<const Value*, std::vector<Node*>>& users) {
  auto it = users.find(read);
  if (it == users.end()) return false;
  bool weight = false;
  for (const Node* u : it->second) {
    switch (u->op()) {
      case ir::Op::kEmbedding:
        return false;
      case ir::Op::kLinear:
        weight = weight || u->operand(ir::LinearView::kW) == read;
        break;
      case ir::Op::kConv2d:
        weight = weight || u->operand(ir::Conv2dView::kW) == read;
        break;
      case ir::Op::kMatmul:
        weight = true;
        break;
      default:
        break;
    }
  }
  return weight;
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
    if (n == (*loss)->def()) loss_pos = i;
    bool depends = false;
    if (ir::ParamView::is(*n)) {
      const ir::Var* var = m.findVar(ir::ParamView(*n).var());
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
  const Value* loss_value = *loss;
  auto seed = g->create(ir::ConstantArgs{.value = 1.0}.spec({.names = {ir::gradName(loss_value)},
                                                             .declared_types = {loss_value->type()},
                                                             .scope = loss_value->def()->scope()}));
  if (!seed.ok()) return seed.status();
  grads[loss_value] = (*seed)->result();
  AutodiffContext ctx(*g, grads, needs);
  for (size_t i = loss_pos + 1; i-- > 0;) {
    const Node* n = g->nodes()[i].get();
    if (ir::ParamView::is(*n) || !needs.contains(n->numResults() ? n->result() : nullptr)) continue;
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
    absl::string_view var = ir::ParamView(*read).var();
    auto [slot, inserted] = per_var.try_emplace(var, read, it->second);
    if (inserted) {
      var_order.push_back(var);
      continue;
    }
    auto sum = g->create(ir::AddArgs{.a = slot->second.second, .b = it->second}.spec(
        {.names = {ir::gradName(slot->second.first->result())}, .scope = read->scope()}));
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
  const ir::OptimizerInfo& opt = *ir::opInfo(optimizer_).optimizer;
  const int decay_attr = ir::opInfo(optimizer_).attrIndex("weight_decay");
  const auto users =
      decay_matrices_only_ ? g->users() : absl::flat_hash_map<const Value*, std::vector<Node*>>{};
  for (const auto& [unused, var_name] : ready) {
    const auto& [read, grad] = per_var.at(var_name);
    // A copy: readState adds variables to the module, which moves its vector's elements.
    const ir::Var var = *m.findVar(ir::ParamView(*read).var());
    // The single form's operands by position: weight, gradient, and each state present
    // under these attributes (absent optional states are the trailing ones).
    std::vector<Value*> operands(opt.operands, nullptr);
    operands[opt.param] = read->result();
    operands[opt.grad] = grad;
    for (const ir::OptimizerStateSpec& s : opt.states) {
      if (!ir::UpdateView::statePresent(s, hyper_)) continue;
      ASSIGN_OR_RETURN(operands[s.operand], readState(m, *g, init, var, s, read->scope()));
    }
    operands.erase(std::remove(operands.begin(), operands.end(), nullptr), operands.end());
    std::vector<ir::AttrValue> hyper = hyper_;
    if (decay_matrices_only_ && decay_attr >= 0 && !isMatrix(read->result(), users))
      hyper[static_cast<size_t>(decay_attr)] = 0.0;
    auto update = g->create({.op = optimizer_,
                             .operands = std::move(operands),
                             .attr_values = std::move(hyper),
                             .scope = read->scope()});
    if (!update.ok()) return update.status();
  }
  return true;
}

absl::string_view Autodiff::optionsHelp() {
  static const std::string* text = [] {
    std::vector<std::string> names, each;
    for (const ir::OpInfo& info : ir::allOps()) {
      if (info.optimizer == nullptr || info.optimizer->grouped_of || info.optimizer->sharded_of)
        continue;
      const std::string name = optimizerShortName(info.op);
      names.push_back(absl::StrCat(name, info.op == kDefaultOptimizer ? " (default)" : ""));
      std::vector<std::string> options;
      for (const ir::AttrSpec& a : info.attrs) {
        const std::optional<double> v = optimizerDefault(info.op, a.name);
        options.push_back(v ? absl::StrCat(optionName(a.name), "=", ir::formatDouble(*v))
                            : absl::StrCat(optionName(a.name), " (required)"));
      }
      each.push_back(absl::StrCat(name, ": ", absl::StrJoin(options, ", ")));
    }
    return new std::string(
        absl::StrCat("optimizer=", absl::StrJoin(names, "|"), "; ", absl::StrJoin(each, "; ")));
  }();
  return *text;
}

std::string Autodiff::optionsText() const {
  const ir::OpInfo& info = ir::opInfo(optimizer_);
  std::string out = "{";
  if (optimizer_ != kDefaultOptimizer)
    absl::StrAppend(&out, "optimizer=", optimizerShortName(optimizer_), ",");
  for (size_t i = 0; i < hyper_.size(); ++i)
    absl::StrAppend(&out, i ? "," : "", optionName(info.attrs[i].name), "=",
                    ir::toString(hyper_[i]));
  if (decay_matrices_only_) absl::StrAppend(&out, ",decay=matrices");
  return out + "}";
}

absl::StatusOr<std::unique_ptr<Pass>> Autodiff::create(PassOptions& opts) {
  ASSIGN_OR_RETURN(std::string name,
                   opts.getString("optimizer", optimizerShortName(kDefaultOptimizer)));
  absl::StatusOr<ir::Op> op = optimizerByName(name);
  if (!op.ok())
    return absl::InvalidArgumentError(absl::StrCat(
        "pass autodiff: option 'optimizer' must name an optimizer update op (", optimizerNames(),
        ", or their ops such as ", ir::opInfo(kDefaultOptimizer).name, "), got '", name, "'"));
  // Every attribute of the optimizer is an option: numbers (a float or an int).
  const ir::OpInfo& info = ir::opInfo(*op);
  std::vector<ir::AttrValue> hyper;
  for (const ir::AttrSpec& a : info.attrs) {
    const std::string key = optionName(a.name);
    if (a.kind != ir::AttrKind::kFloat && a.kind != ir::AttrKind::kInt)
      return absl::InternalError(absl::StrCat("pass autodiff: ", info.name, "'s attribute ", a.name,
                                              " is no number, which options cannot set"));
    const std::optional<double> fallback = optimizerDefault(*op, a.name);
    if (!fallback && !opts.values().contains(key))
      return absl::InvalidArgumentError(
          absl::StrCat("pass autodiff: option '", key, "' is required by ", info.name));
    if (a.kind == ir::AttrKind::kInt) {
      ASSIGN_OR_RETURN(int64_t v, opts.getInt(key, static_cast<int64_t>(fallback.value_or(0))));
      hyper.emplace_back(v);
    } else {
      ASSIGN_OR_RETURN(double v, opts.getDouble(key, fallback.value_or(0)));
      hyper.emplace_back(v);
    }
  }
  // The parameter groups of weight decay, after the optimizer's own values.
  ASSIGN_OR_RETURN(const std::string decay, opts.getString("decay", "all"));
  if (decay != "all" && decay != "matrices")
    return absl::InvalidArgumentError(absl::StrCat(
        "pass autodiff: option 'decay' is all (every trained variable) or matrices (the "
        "weights of linear, conv2d and matmul only), got '",
        decay, "'"));
  RETURN_IF_ERROR(opts.finish());
  for (size_t i = 0; i < hyper.size(); ++i) {
    const ir::AttrSpec& a = info.attrs[i];
    const double v = a.kind == ir::AttrKind::kInt ? static_cast<double>(std::get<int64_t>(hyper[i]))
                                                  : std::get<double>(hyper[i]);
    if (std::string problem = optimizerValueProblem(a, v); !problem.empty())
      return absl::InvalidArgumentError(
          absl::StrCat("pass autodiff: option '", optionName(a.name), "' ", problem));
  }
  return std::unique_ptr<Pass>(new Autodiff(*op, std::move(hyper), decay == "matrices"));
}

}  // namespace tandem::passes

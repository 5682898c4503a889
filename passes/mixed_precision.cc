#include "passes/mixed_precision.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ir/interfaces.h"
#include "ir/op_views.h"
#include "ir/predict_graph.h"
#include "ir/status_macros.h"
#include "passes/insertions.h"

namespace tandem::passes {
namespace {

using ir::DType;
using ir::Node;
using ir::Op;
using ir::Value;

bool isFloat(DType t) { return t == DType::kF32 || t == DType::kBF16; }

/// Variables stay f32 masters: an operand read straight from one is never cast.
bool isVariableRead(const Value* v) { return v->def() != nullptr && ir::ParamView::is(*v->def()); }

class GraphRewrite {
 public:
  GraphRewrite(ir::Graph& g, DType low) : g_(g), low_(low), insert_(g), pos_(g.positions()) {}

  absl::StatusOr<bool> run() {
    // Only the nodes that were there before: the casts created on the way are appended at
    // the end until apply() moves them, and are already typed.
    const size_t count = g_.numNodes();
    std::vector<DType> returned;
    for (const Value* v : g_.outputs()) returned.push_back(v->type().dtype);
    for (size_t i = 0; i < count; ++i) {
      Node& n = *g_.nodes()[i];
      if (n.info().has(ir::kDeclaredType) || ir::ParamView::is(n) || n.numOperands() == 0) continue;
      bool touched = false;
      for (size_t k = 0; k < n.numOperands(); ++k) {
        std::optional<DType> want = wanted(n, k);
        if (!want || n.operand(k)->type().dtype == *want) continue;
        ASSIGN_OR_RETURN(Value * cast, castOf(n.operand(k), *want, pos_.at(&n)));
        n.setOperand(k, cast);
        touched = true;
      }
      // Operands may have changed dtype upstream even when none was cast here.
      RETURN_IF_ERROR(retype(n));
      changed_ = changed_ || touched;
    }
    // What the graph returns keeps its dtype (a prediction's logits stay f32, as the model
    // declared them), cast back after the last node.
    std::vector<Value*> outputs = g_.outputs();
    bool recast = false;
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (outputs[k]->type().dtype == returned[k]) continue;
      ASSIGN_OR_RETURN(outputs[k], castOf(outputs[k], returned[k], count));
      recast = true;
    }
    if (recast) g_.setOutputs(std::move(outputs));
    insert_.apply();
    return changed_;
  }

 private:
  /// The dtype operand `k` of `n` should have, or nullopt to leave it alone.
  std::optional<DType> wanted(const Node& n, size_t k) const {
    const Value* v = n.operand(k);
    if (!isFloat(v->type().dtype) || isVariableRead(v)) return std::nullopt;
    if (n.info().has(ir::kFullPrecision)) return DType::kF32;
    if (n.info().has(ir::kLowPrecision)) return k == 0 ? std::optional(low_) : std::nullopt;
    // Followers: low as soon as one activation operand is.
    for (const Value* o : n.operands())
      if (o->type().dtype == low_ && !isVariableRead(o)) return low_;
    return std::nullopt;
  }

  /// `v` cast to `to`, made once, right before its first reader at position `reader`.
  absl::StatusOr<Value*> castOf(Value* v, DType to, size_t reader) {
    auto [it, inserted] = casts_.try_emplace(std::make_pair(v, to), nullptr);
    if (!inserted) return it->second;
    const Node* def = v->def();
    ASSIGN_OR_RETURN(
        Node * cast,
        insert_.add(reader - 1,
                    ir::CastArgs{.x = v, .dtype = *ir::parseCastType(ir::dtypeName(to))}.spec(
                        {.device = def != nullptr ? def->device() : std::nullopt,
                         .names = {absl::StrCat(v->name(), ".", ir::dtypeName(to))},
                         .scope = def != nullptr ? def->scope() : std::string()})));
    changed_ = true;
    return it->second = cast->result();
  }

  /// Runs `n`'s shape rule again over its (possibly retyped) operands.
  absl::Status retype(Node& n) {
    auto types = ir::inferTypes(n);
    if (!types.ok())
      return absl::Status(types.status().code(),
                          absl::StrCat("mixed-precision: ", n.describe(), ": ", types.status().message()));
    for (size_t r = 0; r < n.numResults(); ++r) {
      if (n.result(r)->type() == (*types)[r]) continue;
      n.result(r)->setType((*types)[r]);
      changed_ = true;
    }
    return absl::OkStatus();
  }

  ir::Graph& g_;
  DType low_;
  Insertions insert_;
  ir::Graph::Positions pos_;
  absl::flat_hash_map<std::pair<const Value*, DType>, Value*> casts_;
  bool changed_ = false;
};

}  // namespace

absl::StatusOr<bool> MixedPrecision::run(ir::Module& m) {
  if (m.isReplicated())
    return absl::FailedPreconditionError(
        "mixed-precision: run it before replicate (the module is already replicated)");
  bool changed = false;
  for (absl::string_view name : {ir::kTrainGraph, ir::kEvalGraph, ir::kPredictGraph}) {
    ir::Graph* g = m.graph(name);
    if (g == nullptr) continue;
    for (const auto& n : g->nodes())
      if (ir::UpdateView::is(*n) || n->info().has(ir::kBackward))
        return absl::FailedPreconditionError(absl::StrCat(
            "mixed-precision: graph @", name, " already has a backward pass (", n->describe(),
            "); run mixed-precision before autodiff, which then derives a ",
            ir::dtypeName(low_), " backward"));
    ASSIGN_OR_RETURN(bool c, GraphRewrite(*g, low_).run());
    changed = changed || c;
  }
  return changed;
}

std::string MixedPrecision::optionsText() const {
  return absl::StrCat("{dtype=", ir::dtypeName(low_), "}");
}

absl::StatusOr<std::unique_ptr<Pass>> MixedPrecision::create(PassOptions& opts) {
  ASSIGN_OR_RETURN(std::string dtype, opts.getString("dtype", "bf16"));
  RETURN_IF_ERROR(opts.finish());
  if (dtype != "bf16")
    return absl::InvalidArgumentError(absl::StrCat(
        "pass mixed-precision: option 'dtype' must be bf16 (got '", dtype,
        "'; f16 has no CPU kernels and needs loss scaling, which Tandem does not do)"));
  return std::unique_ptr<Pass>(new MixedPrecision(DType::kBF16));
}

}  // namespace tandem::passes

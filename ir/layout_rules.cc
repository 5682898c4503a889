#include "ir/layout_rules.h"

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "ir/plan.h"

namespace tandem::ir {

const TargetInfo* LayoutTargets::of(const Node& n) {
  if (!n.device()) return nullptr;  // a collective, or host data
  const size_t kind = n.device()->kind.id();
  if (kind >= by_kind_.size()) by_kind_.resize(kind + 1);
  if (!by_kind_[kind]) {
    const TargetInfo* t = findTarget(n.device()->kind);
    by_kind_[kind] = t != nullptr && t->preferred_layout != ActivationLayout::kPlain &&
                             t->layout_rules.slot && t->layout_rules.eligible
                         ? t
                         : nullptr;
  }
  return *by_kind_[kind];
}

std::optional<int> layoutSlot(const TargetInfo* t, const Node& n, bool result, size_t index) {
  if (t == nullptr) return std::nullopt;
  return t->layout_rules.slot(n, result, index);
}

absl::Status checkNodeLayouts(const Node& n, const TargetInfo* t,
                              absl::FunctionRef<ActivationLayout(const Value&)> layout_of) {
  // A slot as messages name it: "operand 1 %x.0". Built only for an error: this runs on
  // every slot of every node of a module.
  struct Slot {
    bool result;
    size_t index;
    const Value* value;
    std::string text() const {
      return absl::StrCat(result ? "result " : "operand ", index, " %", value->name());
    }
  };
  struct Linked {
    int link;
    Slot slot;
    ActivationLayout layout;
  };
  absl::InlinedVector<Linked, 4> links;
  auto check = [&](const Value& v, bool result, size_t i) -> absl::Status {
    const ActivationLayout l = layout_of(v);
    const std::optional<int> link = layoutSlot(t, n, result, i);
    const Slot slot{result, i, &v};
    const bool four_d = v.type().shape.size() == 4;
    if (l != ActivationLayout::kPlain && (!link || !four_d || l != t->preferred_layout)) {
      const std::string why =
          !link     ? std::string("that slot takes only nchw")
          : !four_d ? std::string("it is not 4-D")
                    : absl::StrCat(t->display_name, " keeps ", layoutName(t->preferred_layout));
      return absl::FailedPreconditionError(absl::StrCat(n.describe(), ": its kernel cannot take ",
                                                        slot.text(), " in ", layoutName(l), " (",
                                                        why, ")"));
    }
    if (!link || !four_d) return absl::OkStatus();
    for (const Linked& other : links)
      if (other.link == *link && other.layout != l)
        return absl::FailedPreconditionError(absl::StrCat(
            n.describe(), ": ", slot.text(), " is ", layoutName(l), " but ", other.slot.text(),
            ", which its kernel takes in the same layout, is ", layoutName(other.layout)));
    links.push_back({*link, slot, l});
    return absl::OkStatus();
  };
  for (size_t i = 0; i < n.numOperands(); ++i)
    if (absl::Status s = check(*n.operand(i), false, i); !s.ok()) return s;
  for (size_t r = 0; r < n.numResults(); ++r)
    if (absl::Status s = check(*n.result(r), true, r); !s.ok()) return s;
  return absl::OkStatus();
}

bool mayKeepLayout(const Value& v, const TargetInfo* t) {
  return t != nullptr && !isSource(v.def()->op()) && v.type().shape.size() == 4 &&
         t->layout_rules.eligible(v);
}

absl::Status checkValueLayout(const Value& v, const TargetInfo* t, ActivationLayout layout) {
  if (layout == ActivationLayout::kPlain) return absl::OkStatus();
  auto bad = [&](absl::string_view why) {
    return absl::FailedPreconditionError(
        absl::StrCat("%", v.name(), " cannot be kept in ", layoutName(layout), ": ", why));
  };
  if (isSource(v.def()->op()))
    return bad("graph inputs and variables stay plain (the host and the optimizer see them)");
  if (t == nullptr || t->preferred_layout != layout)
    return bad(t != nullptr        ? absl::StrCat(t->display_name, " devices keep ",
                                                  layoutName(t->preferred_layout))
               : v.def()->device() ? std::string("its device keeps every tensor plain")
                                   : std::string("collectives move plain tensors"));
  if (!mayKeepLayout(v, t))  // not 4-D, or not eligible under t's rules
    return bad(absl::StrCat("its type ", toString(v.type()), " is not one ", t->display_name,
                            " kernels take in it"));
  return absl::OkStatus();
}

absl::flat_hash_set<const Value*> valuesPlannedIn(const Graph& g, ActivationLayout layout) {
  absl::flat_hash_set<const Value*> kept;
  const GraphPlan* plan = g.plan();
  if (plan == nullptr || !plan->has(PlanPart::kLayouts)) return kept;
  for (const auto& n : g.nodes()) {
    if (n->id() >= plan->nodes.size()) continue;
    const NodePlan& p = plan->of(*n);
    for (size_t r = 0; r < p.layouts.size() && r < n->numResults(); ++r)
      if (p.layouts[r] == layout) kept.insert(n->result(r));
  }
  return kept;
}

}  // namespace tandem::ir

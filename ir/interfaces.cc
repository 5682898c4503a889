#include "ir/interfaces.h"

#include <algorithm>

namespace tandem::ir {

bool UpdateView::statePresent(const OptimizerStateSpec& s, const std::vector<AttrValue>& attrs) {
  if (s.when_attr < 0) return true;
  const auto* v = std::get_if<double>(&attrs[static_cast<size_t>(s.when_attr)]);
  return v != nullptr && *v > 0;
}

UpdateView::UpdateView(const Node& n) : n_(&n), info_(n.info().optimizer) {
  for (size_t s = 0; s < info_->states.size(); ++s)
    if (statePresent(info_->states[s], n.attrs())) present_.push_back(s);
  // The learning-rate factor is one operand past the per-parameter ones (every parameter
  // takes at least two, weight and gradient, so the count tells it apart) and is read from
  // a fed variable: an operand too many of another kind is no factor, and the shape rule
  // names it.
  const size_t count = n.numOperands();
  const size_t per = streams();
  const bool scaled = info_->lr_scale && count % per == 1 && count > per &&
                      readsFedVariable(*n.operand(count - 1));
  if (grouped()) {
    const size_t rest = count - (scaled ? 1 : 0);
    k_ = rest % per == 0 ? rest / per : 0;
  }
  if (scaled) lr_scale_ = count - 1;
}

bool readsFedVariable(const Value& v) {
  const Node* def = v.def();
  if (def == nullptr || def->op() != Op::kParam || def->graph() == nullptr) return false;
  const std::string* name = variableOf(*def);
  const Var* var = name == nullptr ? nullptr : def->graph()->module()->findVar(*name);
  return var != nullptr && var->role == VarRole::kFed;
}

std::optional<UpdateView> UpdateView::of(const Node& n) {
  if (n.info().optimizer == nullptr) return std::nullopt;
  return UpdateView(n);
}

std::vector<const Value*> updateGradients(const Node& n) {
  std::optional<UpdateView> u = UpdateView::of(n);
  if (!u) return {};
  std::vector<const Value*> out;
  out.reserve(u->numParams());
  for (size_t j = 0; j < u->numParams(); ++j)
    if (u->gradOperand(j) < n.numOperands()) out.push_back(u->grad(j));
  return out;
}

const std::string* variableOf(const Node& n) {
  const auto& specs = n.info().attrs;
  for (size_t i = 0; i < specs.size() && i < n.attrs().size(); ++i)
    if (specs[i].kind == AttrKind::kSymbol) return &std::get<Symbol>(n.attrs()[i]).name;
  return nullptr;
}

std::optional<CollectiveView> CollectiveView::of(const Node& n) {
  if (n.info().collective == nullptr) return std::nullopt;
  return CollectiveView(n);
}

std::vector<std::vector<size_t>> CollectiveView::groups() const {
  const size_t devices = this->devices().size();
  const size_t count = static_cast<size_t>(std::max<int64_t>(numGroups(), 1));
  const size_t size = devices / count;
  std::vector<std::vector<size_t>> out(count);
  for (size_t k = 0; k < devices; ++k)
    out[std::min(k / std::max<size_t>(size, 1), count - 1)].push_back(k);
  return out;
}

size_t CollectiveView::groupOf(size_t k) const {
  const size_t count = static_cast<size_t>(std::max<int64_t>(numGroups(), 1));
  const size_t size = std::max<size_t>(devices().size() / count, 1);
  return std::min(k / size, count - 1);
}

std::optional<int64_t> CollectiveView::bucket() const {
  const int i = n_->info().attrIndex("bucket");
  if (i < 0) return std::nullopt;
  return std::get<int64_t>(n_->attrs()[static_cast<size_t>(i)]);
}

IndexRange CollectiveView::readsAt(size_t k) const {
  const size_t n = n_->numOperands(), d = std::max<size_t>(devices().size(), 1);
  switch (info_->reads) {
    case CollectiveReads::kPerDevice:
      return {k * (n / d), (k + 1) * (n / d)};
    case CollectiveReads::kGroupSource: {
      const size_t per = n / static_cast<size_t>(std::max<int64_t>(numGroups(), 1));
      return {groupOf(k) * per, (groupOf(k) + 1) * per};
    }
    case CollectiveReads::kModuleDevices:
      return {0, n};
    case CollectiveReads::kHost:
      return {};
  }
  return {};
}

IndexRange CollectiveView::writesAt(size_t k) const {
  const size_t n = n_->numResults(), d = std::max<size_t>(devices().size(), 1);
  if (info_->writes == CollectiveWrites::kFirstDevice)
    return k == 0 ? IndexRange{0, n} : IndexRange{};
  return {k * (n / d), (k + 1) * (n / d)};
}

size_t CollectiveView::positionOfResult(size_t i) const {
  if (info_->writes == CollectiveWrites::kFirstDevice) return 0;
  const size_t per = std::max<size_t>(n_->numResults() / std::max<size_t>(devices().size(), 1), 1);
  return std::min(i / per, devices().size() - 1);
}

}  // namespace tandem::ir

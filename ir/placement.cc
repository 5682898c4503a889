#include "ir/placement.h"

#include "ir/interfaces.h"

namespace tandem::ir {

Device deviceOfValue(const Value& v) {
  if (v.device()) return *v.device();
  const Node& n = *v.def();
  if (n.device()) return *n.device();
  const CollectiveView c(n);
  return c.devices()[c.positionOfResult(static_cast<size_t>(v.index()))];
}

std::optional<size_t> deviceIndexOfValue(const Module& m, const Value& v) {
  return m.deviceIndex(deviceOfValue(v));
}

int64_t numGroups(const Node& n) {
  std::optional<CollectiveView> c = CollectiveView::of(n);
  return c ? c->numGroups() : 1;
}

std::vector<std::vector<size_t>> collectiveGroups(const Node& n) {
  return CollectiveView(n).groups();
}

size_t groupOfPosition(const Node& n, size_t k) { return CollectiveView(n).groupOf(k); }

}  // namespace tandem::ir

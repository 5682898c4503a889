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

std::vector<size_t> sharesOf(const Module& m, const Node& n) {
  if (isSource(n.op())) return {};
  if (streamOf(n) == StreamKind::kCompute) return {*m.deviceIndex(*n.device())};
  const std::vector<Device> devices = CollectiveView(n).devices();
  std::vector<size_t> out;
  out.reserve(devices.size());
  for (const Device& d : devices) out.push_back(*m.deviceIndex(d));
  return out;
}

std::vector<const Value*> readsOf(const Module& m, const Node& n, size_t k) {
  if (streamOf(n) == StreamKind::kCompute) return {n.operands().begin(), n.operands().end()};
  const CollectiveView c(n);
  const IndexRange in = c.readsAt(k);
  // A group's sources are read by the share on their device (the root) only.
  if (c.info().reads == CollectiveReads::kGroupSource &&
      deviceIndexOfValue(m, *n.operand(in.begin)) != m.deviceIndex(c.devices()[k]))
    return {};
  return {n.operands().begin() + static_cast<ptrdiff_t>(in.begin),
          n.operands().begin() + static_cast<ptrdiff_t>(in.end)};
}

}  // namespace tandem::ir

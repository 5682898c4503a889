#include "ir/placement.h"

namespace tandem::ir {

Device deviceOfValue(const Value& v) {
  if (v.device()) return *v.device();
  const Node& n = *v.def();
  if (n.device()) return *n.device();
  const auto& devices = n.devicesAttr();
  if (n.op() == Op::kConcat) return devices.front();
  size_t per_device = n.numResults() / devices.size();
  return devices[static_cast<size_t>(v.index()) / per_device];
}

std::optional<size_t> deviceIndexOfValue(const Module& m, const Value& v) {
  return m.deviceIndex(deviceOfValue(v));
}

int64_t numGroups(const Node& n) {
  return n.info().attrIndex("groups") >= 0 ? n.intAttr("groups") : 1;
}

std::vector<std::vector<size_t>> collectiveGroups(const Node& n) {
  const size_t devices = n.devicesAttr().size();
  const size_t count = static_cast<size_t>(std::max<int64_t>(numGroups(n), 1));
  const size_t size = devices / count;
  std::vector<std::vector<size_t>> out(count);
  for (size_t k = 0; k < devices; ++k)
    out[std::min(k / std::max<size_t>(size, 1), count - 1)].push_back(k);
  return out;
}

size_t groupOfPosition(const Node& n, size_t k) {
  const size_t count = static_cast<size_t>(std::max<int64_t>(numGroups(n), 1));
  const size_t size = std::max<size_t>(n.devicesAttr().size() / count, 1);
  return std::min(k / size, count - 1);
}

std::vector<size_t> sharesOf(const Module& m, const Node& n) {
  if (n.op() == Op::kInput || n.op() == Op::kParam) return {};
  if (streamOf(n) == StreamKind::kCompute) return {*m.deviceIndex(*n.device())};
  std::vector<size_t> out;
  out.reserve(n.devicesAttr().size());
  for (const Device& d : n.devicesAttr()) out.push_back(*m.deviceIndex(d));
  return out;
}

std::vector<const Value*> readsOf(const Module& m, const Node& n, size_t k) {
  if (streamOf(n) == StreamKind::kCompute) return {n.operands().begin(), n.operands().end()};
  const size_t shares = n.devicesAttr().size();
  switch (n.op()) {
    case Op::kAllReduce: {
      const size_t per = n.numOperands() / shares;
      return {n.operands().begin() + static_cast<ptrdiff_t>(k * per),
              n.operands().begin() + static_cast<ptrdiff_t>((k + 1) * per)};
    }
    case Op::kConcat:
      return {n.operands().begin(), n.operands().end()};
    case Op::kBroadcast: {
      // The group's k sources, read by the share on their device (the root) only.
      const size_t per = n.numOperands() / static_cast<size_t>(numGroups(n));
      const size_t first = groupOfPosition(n, k) * per;
      if (deviceIndexOfValue(m, *n.operand(first)) != m.deviceIndex(n.devicesAttr()[k])) return {};
      return {n.operands().begin() + static_cast<ptrdiff_t>(first),
              n.operands().begin() + static_cast<ptrdiff_t>(first + per)};
    }
    default:
      return {};  // split: the host's batch, staged before the step
  }
}

}  // namespace tandem::ir
